"""qdebug's watch mode inside a real vLLM (QDEBUG_VLLM_WATCH=1), under untagged concurrent traffic: what /metrics counts
and what the findings log names, against the engine's own traces and against a clean server."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from qdebug.engine.batch_log import read_batch_log
from qdebug.engine.watch_log import read_findings

from .row_evidence import NOBODY, SHIFTED, not_own, row_owners
from .vllm_server import VllmServer
from .watch_traffic import burst, distinct_images, watch_series

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.vllm
CHECKS, VIOLATIONS, ERRORS = "qdebug_watch_checks_total", "qdebug_watch_violations_total", "qdebug_watch_errors_total"


def watched(vllm_py, where, **env) -> VllmServer:
    """A vLLM with the watch on, its findings in `where/watch` (`server.watch`)."""
    where.mkdir(parents=True, exist_ok=True)
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(where / "watch"), **env}
    server = VllmServer(vllm_py, where, trace_dir=where / "traces" if env.pop("trace", None) else None,
                        trace_all="QDEBUG_VLLM_INJECT" in env, extra_env=env)
    server.watch, server.traces = where / "watch", where / "traces"
    return server


def settled(server, want) -> dict:
    """/metrics once `want(series)` holds and the counters have stopped moving, else the last read.

    The worker writes its counters twice a second, and a step's checks may still be counting when `want` first holds
    (a burst's last steps, the findings thread): a count compared with the findings log must be the final one."""
    deadline = time.monotonic() + 30
    last, since = None, time.monotonic()
    while True:
        series = watch_series(server)
        if series != last:
            last, since = series, time.monotonic()
        if (want(series) and time.monotonic() - since >= 1.5) or time.monotonic() > deadline:
            return series
        time.sleep(0.25)


def _violations(series: dict) -> int:
    """Violations counted over every check."""
    return int(sum(v for (name, _), v in series.items() if name == VIOLATIONS))


def _violated(found: list) -> list:
    """The findings that are violations (not failed checks)."""
    return [f for f in found if f.outcome == "violation"]


def _placement(found: list) -> list:
    """The placement violations among findings."""
    return [f for f in _violated(found) if f.check == "placement"]


def logged(server, count: int) -> list:
    """The findings log once it holds `count` lines (written off the engine's step, on a thread), else what it holds."""
    deadline = time.monotonic() + 30
    while len(found := read_findings(str(server.watch))) < count and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def agreed(server, series: dict, check: str) -> tuple[dict, list]:
    """/metrics and the findings log once every check's violations on /metrics are as many as the log's lines of that
    check (`check` included, even at none), else the last reads: each is written off the engine's step at its own pace
    (the counters twice a second, the log by a thread), so on a loaded machine a settled read of the counters can
    still lag the log by a step's checks (13 against 17 in one CI run)."""
    def counts(found: list) -> dict[str, int]:
        out = {check: 0}
        for f in found:
            if f.outcome == "violation":
                out[f.check] = out.get(f.check, 0) + 1
        return out

    def same(series: dict, found: list) -> bool:
        return all(int(series.get((VIOLATIONS, c), 0)) == n for c, n in counts(found).items())

    found = logged(server, int(series.get((VIOLATIONS, check), 0)))
    deadline = time.monotonic() + 30
    while not same(series, found) and time.monotonic() < deadline:
        logged_now = counts(found)
        series = settled(server, lambda s: all(s.get((VIOLATIONS, c), 0) >= n for c, n in logged_now.items()))
        found = logged(server, sum(int(v) for (name, _), v in series.items() if name in (VIOLATIONS, ERRORS)))
    return series, found


def test_a_shared_visual_buffer_is_counted_on_metrics_and_its_donors_are_the_engines(vllm_py, tmp_path):
    from qdebug.analysis.detectors.contamination import OWN, UNMATCHED
    from qdebug.analysis.engine_evidence import engine_rows
    from qdebug.trace.schema import load_trace

    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="shared-visual-buffer", trace=True) as server:
        for attempt in range(3):  # the fault needs two requests' images in one step; a burst of 24 at 12 gives it that
            burst(server, distinct_images(tmp_path / "images", 24, seed=attempt), concurrency=12)
            sent = 24 * (attempt + 1)
            series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= sent <= s.get((CHECKS, "placement"), 0))
            if series.get((VIOLATIONS, "placement"), 0):
                break
        series, found = agreed(server, series, "placement")
        violations = int(series[(VIOLATIONS, "placement")])
        assert violations > 0, series
        assert series[(CHECKS, "counts")] == sent <= series[(CHECKS, "placement")] and series[(ERRORS, "placement")] == 0, series
    placement = [f for f in found if f.check == "placement" and f.outcome == "violation"]
    assert len(placement) == violations, (violations, [f.evidence for f in placement])
    # every other line of the log is another check's violation (the shared buffer can show in a sampled check too:
    # 7 of 24 lines in one CI run), each counted on /metrics by its own check; none is an error
    others: dict[str, int] = {}
    for f in found:
        if f.check != "placement":
            assert f.outcome == "violation", (f.check, f.outcome, f.evidence)
            others[f.check] = others.get(f.check, 0) + 1
    assert all(series[(VIOLATIONS, c)] == n for c, n in others.items()), (others, series)
    traces = {p.stem: load_trace(p) for p in server.traces.glob("*.qdt")}
    for f in placement:
        assert f.request_id in traces and f.donors and f.stage == "sync", f
        group = {rid: traces[rid] for rid in (f.request_id, *f.cobatched) if rid in traces}
        # the evidence: whose encoder rows the engine's traces hold at its placeholders, read row by row here
        owners = row_owners(group)[f.request_id]
        assert set(f.donors) == set(not_own(owners, f.request_id)) - {NOBODY, SHIFTED}, (f.request_id, f.donors, owners)
        assert f"{sum(not_own(owners, f.request_id).values())} of {sum(owners.values())} rows" in f.evidence, (f.evidence, owners)
        # and the analysis replay uses agrees with it
        _, analysed = engine_rows(group)[f.request_id]
        assert set(f.donors) == set(analysed) - {OWN, UNMATCHED}, (f.request_id, f.donors, analysed)


def test_a_clean_server_under_200_concurrent_requests_three_times_has_no_violation(vllm_py, tmp_path):
    with watched(vllm_py, tmp_path, QDEBUG_VLLM_WATCH_SAMPLE="1") as server:  # every step takes the sampled checks too
        for round_ in range(3):
            burst(server, distinct_images(tmp_path / "images", 200, seed=100 + round_), concurrency=200)
        series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= 600)
    assert series[(CHECKS, "counts")] == 600 and series[(CHECKS, "placement")] >= 600, series  # one item per request
    assert series[(CHECKS, "layout")] > 0 and series[(CHECKS, "logits")] > 0 and series[(CHECKS, "positions")] > 0, series
    assert not any(v for (name, _), v in series.items() if name in (VIOLATIONS, ERRORS)), series
    assert read_findings(str(server.watch)) == []
    # the plugin's clock: every check ran inside a worker step, within the plugin's own time, itself within the steps'
    steps, step_s, own_s = (series[(f"qdebug_watch_{n}_total", "")] for n in ("worker_steps", "worker_step_seconds", "plugin_seconds"))
    checks_s = sum(v for (name, _), v in series.items() if name == "qdebug_watch_check_seconds_total")
    assert steps >= 600 / 256 and 0 < checks_s <= own_s < step_s, series
    documented = set(re.findall(r"^\| `(qdebug_watch_\w+)` \|", (REPO / "docs" / "watch.md").read_text(), re.M))
    assert {name for name, _ in series} == documented  # docs/watch.md's Metrics table is what /metrics serves


def test_a_check_that_raises_is_counted_and_logged_and_the_answers_are_unchanged(vllm_py, tmp_path):
    images = distinct_images(tmp_path / "images", 8, seed=7)
    with watched(vllm_py, tmp_path / "clean") as clean:
        expected = burst(clean, images, concurrency=8, max_tokens=8)
    with watched(vllm_py, tmp_path / "raising", QDEBUG_VLLM_WATCH_RAISE="placement") as server:
        answers = burst(server, images, concurrency=8, max_tokens=8)
        series = settled(server, lambda s: s.get((ERRORS, "placement"), 0) >= 8)
        found = logged(server, int(series[(ERRORS, "placement")]))
        assert "QDEBUG_VLLM_WATCH_RAISE names placement" in server.log_text()
    assert answers == expected
    assert series[(ERRORS, "placement")] == series[(CHECKS, "placement")] >= 8, series
    assert series[(CHECKS, "counts")] == 8 and series[(ERRORS, "counts")] == 0 == series[(VIOLATIONS, "placement")], series
    assert {f.outcome for f in found} == {"error"} and {f.check for f in found} == {"placement"}, found
    assert len({f.request_id for f in found}) == 8 and all("RuntimeError" in f.evidence for f in found), found


def test_a_violation_records_engine_traces_of_its_request_and_co_batched_ones(vllm_py, tmp_path):
    """Untraced traffic (no request tagged): the flight recorder traces the offending request and those that shared its
    step, and their traces show the donor the finding names; `qdebug watch URL --findings DIR --once --json` agrees."""
    import json

    from qdebug.analysis.detectors.contamination import OWN, UNMATCHED
    from qdebug.analysis.engine_evidence import engine_rows
    from qdebug.trace.schema import load_trace
    from tests.endpoint.conftest import run_qdebug

    where = tmp_path / "srv"
    where.mkdir()
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(where / "watch"), "QDEBUG_VLLM_INJECT": "shared-visual-buffer"}
    with VllmServer(vllm_py, where, extra_env=env) as server:
        server.watch = where / "watch"
        for attempt in range(3):
            burst(server, distinct_images(tmp_path / "images", 24, seed=attempt), concurrency=12)
            sent = 24 * (attempt + 1)
            series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= sent <= s.get((CHECKS, "placement"), 0))
            if series.get((VIOLATIONS, "placement"), 0):
                break
        found = logged(server, int(series[(VIOLATIONS, "placement")]))
        # a sampled logits check may find violations too: one count per check that found any, one line per violation
        # (placement finds one a run: there counts and lines are equal)
        series = settled(server, lambda s: s.get((VIOLATIONS, "placement"), 0) >= len(_placement(read_findings(str(server.watch)))))
        found = _violated(read_findings(str(server.watch)))
        out = tmp_path / "w.json"
        result = run_qdebug("watch", server.url, "--findings", str(server.watch), "--once", "--json", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["violations"] == len(doc["findings"]) == len(found) >= _violations(series) > 0, (doc, series)
    assert len(_placement(found)) == series[(VIOLATIONS, "placement")], (doc, series)
    assert doc["checks"]["placement"]["checks"] == series[(CHECKS, "placement")]
    recorded = [f for f in found if f.trace and f.check == "placement"]
    assert recorded, [f.evidence for f in found]
    snapshots = [json.loads(p.read_text()) for p in server.watch.glob("flight-*.json")]
    assert {s["request_id"] for s in snapshots} <= {f.request_id for f in found if f.trace} and all(s["steps"] for s in snapshots)
    for f in recorded:  # a recording traces the offending request and those of its step; a later violator among them shares it
        traced = next(s["traced"] for s in snapshots if f.request_id in s["traced"])
        paths = {rid: server.watch / "traces" / f"{rid}.qdt" for rid in traced}
        deadline = time.monotonic() + 30
        while not all(p.exists() for p in paths.values()) and time.monotonic() < deadline:
            time.sleep(0.25)
        group = {rid: load_trace(p) for rid, p in paths.items()}
        assert str(server.watch / f.trace) == str(paths[f.request_id])
        # the recorded trace itself holds the violation: rows at its placeholders that are not its own, as many as the
        # finding counts; every donor recorded with it shows its rows there, a donor not recorded shows as no one's
        owners = row_owners(group)[f.request_id]
        foreign = not_own(owners, f.request_id)
        assert foreign and f"{sum(foreign.values())} of {sum(owners.values())} rows" in f.evidence, (f.evidence, owners)
        assert set(foreign) - {NOBODY, SHIFTED} == set(f.donors) & set(traced), (f.donors, owners, traced)
        assert NOBODY in foreign or set(f.donors) <= set(traced), (f.donors, owners, traced)
        # each donor shared the offending request's step, by the plugin's batch records
        steps = [s.prefill for s in read_batch_log(server.watch / "traces").steps if f.request_id in s.prefill]
        assert all(any(d in s for s in steps) for d in f.donors), (f.donors, steps)


def test_head_first_in_a_layers_kernel_is_a_layout_violation_naming_that_layer(vllm_py, tmp_path):
    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="head-first:2", QDEBUG_VLLM_WATCH_SAMPLE="1") as server:
        burst(server, distinct_images(tmp_path / "images", 8, seed=3), concurrency=8)
        series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= 8 and s.get((VIOLATIONS, "layout"), 0) > 0)
        series, found = agreed(server, series, "layout")
    layout = [f for f in found if f.check == "layout"]
    assert layout and len(layout) == series[(VIOLATIONS, "layout")], series
    assert {f.stage for f in layout} == {"layer.2"} and all("layer 2's attention kernel received its value rows head-first" in f.evidence
                                                              for f in layout), [f.evidence for f in layout]
    assert series[(CHECKS, "layout")] > series[(VIOLATIONS, "layout")]  # the other layers were checked and are token-major
    assert series[(VIOLATIONS, "placement")] == 0 == series[(ERRORS, "layout")] and series[(CHECKS, "logits")] > 0, series
    assert series[(CHECKS, "positions")] > 0 and not any(series[(ERRORS, c)] for c in ("positions", "logits", "layout")), series


def test_a_layout_violation_records_the_next_requests_and_their_trace_shows_the_layer(vllm_py, tmp_path):
    """A check after the step's decoder (head-first in layer 2's kernel) cannot trace the request it flags; it arms the
    flight recorder: the next requests whose prompts start are traced, a later layout violation of their step names one
    of their traces, and that trace holds layer 2's layout finding (what the user opens at 3 a.m.)."""
    from qdebug.trace.schema import load_trace

    where = tmp_path / "srv"
    where.mkdir()
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(where / "watch"), "QDEBUG_VLLM_INJECT": "head-first:2",
           "QDEBUG_VLLM_WATCH_SAMPLE": "1"}
    with VllmServer(vllm_py, where, extra_env=env) as server:  # untagged traffic: only the flight recorder traces
        server.watch = where / "watch"
        burst(server, distinct_images(tmp_path / "a", 4, seed=3), concurrency=4)  # flagged inside the decoder: armed
        first = [f for f in logged(server, 1) if f.check == "layout"]
        burst(server, distinct_images(tmp_path / "b", 4, seed=4), concurrency=4)  # these start after: traced
        deadline = time.monotonic() + 60
        while not [f for f in read_findings(str(server.watch)) if f.check == "layout" and f.trace] and time.monotonic() < deadline:
            time.sleep(0.25)
        layout = [f for f in read_findings(str(server.watch)) if f.check == "layout"]
    assert first and not first[0].trace, first  # the first violation could not be traced
    recorded = [f for f in layout if f.trace]
    assert recorded and all(f.stage == "layer.2" for f in layout), [(f.request_id, f.trace) for f in layout]
    f = recorded[0]
    assert f.trace == f"traces/{f.request_id}.qdt", f.trace  # the step's recorded request is the one it names
    path = server.watch / f.trace
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.25)
    trace = load_trace(path)
    assert [x for x in trace.findings if x.kind == "layout" and x.stage == "layer.2"], [(x.kind, x.stage) for x in trace.findings]
    snapshots = [json.loads(p.read_text()) for p in server.watch.glob("flight-*.json")]
    assert any(f.request_id in s["traced"] for s in snapshots), snapshots
