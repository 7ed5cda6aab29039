"""Fuzz (hypothesis): the capture parser and the trace/report loaders meet random and hostile input with one-line
errors only: random bytes, truncated and re-membered zips, and a wrong type in every field of the JSON documents."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qdebug.analysis.diff import model_signature
from qdebug.commands.attn import AttnResult
from qdebug.errors import QDebugError, TraceFormatError
from qdebug.replay.formats.capture import parse_capture
from qdebug.replay.report import load_report
from qdebug.trace.schema import load_trace

DATA = Path(__file__).resolve().parents[1] / "data"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
WRONG = [None, True, -1, 1.5, "x", [], {}, [None], {"a": 1}]


def _paths(doc, prefix=()):
    """Every path into a JSON document (objects and lists included), skipping free-form stage summaries."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k != "summary":
                yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    if not path:
        return value
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


def _zip_with(source: Path, member: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(buf, "w") as zf:
        for info in src.infolist():
            zf.writestr(info.filename, data if info.filename == member else src.read(info.filename))
    return buf.getvalue()


TRACE_DOC = json.loads(zipfile.ZipFile(DATA / "red_circle.qdt").read("trace.json"))
TRACE_PATHS = sorted(set(_paths(TRACE_DOC)), key=str)
REPORT_DOC = json.loads(zipfile.ZipFile(DATA / "burst.qdr").read("report.json"))
REPORT_PATHS = sorted(set(_paths(REPORT_DOC)), key=str)


def _loads_or_refuses(loader, path: Path, case: object = None):
    """The loader returns a value or raises TraceFormatError with a one-line message; anything else fails (naming `case`)."""
    try:
        return loader(path)
    except TraceFormatError as exc:
        assert "\n" not in exc.message and exc.message, case
        return None
    except Exception as exc:
        raise AssertionError(f"{case}: {type(exc).__name__}: {exc}") from exc


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes_are_not_traces(tmp_path, blob):
    path = tmp_path / "r.qdt"
    path.write_bytes(blob)
    assert _loads_or_refuses(load_trace, path) is None
    path = tmp_path / "r.qdr"
    path.write_bytes(blob)
    assert _loads_or_refuses(load_report, path) is None


@FUZZ
@given(st.data())
def test_truncated_traces_and_reports(tmp_path, data):
    for source, loader in ((DATA / "red_circle.qdt", load_trace), (DATA / "burst.qdr", load_report)):
        raw = source.read_bytes()
        cut = data.draw(st.integers(0, len(raw) - 1))
        path = tmp_path / f"t{source.suffix}"
        path.write_bytes(raw[:cut])
        _loads_or_refuses(loader, path)


@FUZZ
@given(st.sampled_from(["trace.json", "tensors.safetensors"]), st.sampled_from(["renamed", "drop", "garbage", "json-list"]))
def test_wrong_members(tmp_path, member, how):
    buf = io.BytesIO()
    with zipfile.ZipFile(DATA / "red_circle.qdt") as src, zipfile.ZipFile(buf, "w") as zf:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == member:
                if how == "drop":
                    continue
                name = f"x/{member}" if how == "renamed" else member
                data = b"\x00garbage" if how == "garbage" else (b"[1, 2]" if how == "json-list" else data)
                zf.writestr(name, data)
            else:
                zf.writestr(info.filename, data)
    path = tmp_path / "m.qdt"
    path.write_bytes(buf.getvalue())
    assert _loads_or_refuses(load_trace, path) is None


def test_wrong_type_in_every_trace_field(tmp_path):
    """Every field of a saved trace's JSON, each wrong value in turn (all of them: ~1,400 loads, seconds; a random
    sample of them let a failure through one CI run in several)."""
    target = tmp_path / "w.qdt"
    for path in TRACE_PATHS:
        for value in WRONG:
            doc = _set(json.loads(json.dumps(TRACE_DOC)), path, value)
            target.write_bytes(_zip_with(DATA / "red_circle.qdt", "trace.json", json.dumps(doc).encode()))
            trace = _loads_or_refuses(load_trace, target, (path, value))
            if trace is not None:  # the value was acceptable there: the trace must still serve its readers
                trace.to_json()
                trace.image_positions()
                AttnResult(trace=trace).to_json()  # what `attn --json` and the reports read
                model_signature(trace)  # what diff compares first


def test_wrong_type_in_every_report_field(tmp_path):
    """Every field of a saved replay report's JSON, each wrong value in turn (a finding's kind "x" was a traceback)."""
    target = tmp_path / "w.qdr"
    for path in REPORT_PATHS:
        for value in WRONG:
            doc = _set(json.loads(json.dumps(REPORT_DOC)), path, value)
            target.write_bytes(_zip_with(DATA / "burst.qdr", "report.json", json.dumps(doc).encode()))
            report = _loads_or_refuses(load_report, target, (path, value))
            if report is not None:
                report.to_json()


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=200), JSON_VALUES.map(json.dumps)), min_size=1, max_size=8))
def test_capture_lines_of_any_shape(tmp_path, lines):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(line.replace("\n", " ").replace("\r", " ") for line in lines) + "\n", encoding="utf-8", errors="surrogatepass")
    try:
        batch = parse_capture(path)
    except QDebugError as exc:
        assert "\n" not in exc.message
        return
    for entry in batch.requests:
        assert (entry.request is None) != (entry.error is None)
        if entry.error is not None:
            assert "\n" not in entry.error


CONTENT_PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": JSON_VALUES}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.one_of(JSON_VALUES, st.fixed_dictionaries({"url": st.one_of(
        JSON_VALUES, st.sampled_from(["data:image/png;base64,", "data:image/png;base64,iVBORw0KGgo=", "file:///etc/passwd",
                                      "../../etc/passwd", "http://example.com/x.png", "capture/req-01.png", "data:,x"])
    )}))}),
    JSON_VALUES,
)


@FUZZ
@given(st.fixed_dictionaries({
    "id": JSON_VALUES,
    "messages": st.one_of(JSON_VALUES, st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "system", 3]),
                                                                      "content": st.one_of(JSON_VALUES, st.lists(CONTENT_PART, max_size=3))}), max_size=3)),
    "max_tokens": JSON_VALUES,
    "arrival_ts": JSON_VALUES,
    "observed": JSON_VALUES,
}))
def test_capture_requests_with_hostile_fields(tmp_path, obj):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(obj) + "\n")
    (entry,) = parse_capture(path).requests
    assert (entry.request is None) != (entry.error is None)
    if entry.error is not None:
        assert "\n" not in entry.error and entry.error


def test_the_fixtures_themselves_load():
    assert load_trace(DATA / "red_circle.qdt").generated_text
    assert load_report(DATA / "burst.qdr").requests



PNG = (Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png").read_bytes()


@FUZZ
@given(st.data())
def test_mutated_image_files_load_or_fail_in_one_line(tmp_path, data):
    from qdebug.errors import ImageError
    from qdebug.trace.request import load_image

    raw = bytearray(PNG)
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "m.png"
    path.write_bytes(bytes(raw[: data.draw(st.integers(1, len(raw)))]))
    try:
        image = load_image(path)
    except ImageError as exc:
        assert "\n" not in exc.message
    else:
        assert image.mode == "RGB"
