"""Each watch check fires inside a real vLLM under the plugin's preset that breaks what it checks, naming the requests
the engine's own records show (its traces, its batch log): `counts` under placeholder-shift:1, `positions` under
temporal-ids-flat, `logits` under shared-visual-buffer. (`placement` fires under shared-visual-buffer and `layout`
under head-first:2 in test_watch.py, `encoder_batch` under batch-dependent-encoder in test_watch_encoder_batch.py.)"""

from __future__ import annotations

import base64
import re

import pytest

from qdebug.engine.batch_log import read_batch_log

from .row_evidence import row_owners
from .test_video import PROMPT as VIDEO_PROMPT
from .test_video import _frames
from .test_watch import CHECKS, ERRORS, VIOLATIONS, agreed, settled, watched
from .watch_traffic import body_for, burst, distinct_images, send_all

pytestmark = pytest.mark.vllm
COUNTS = re.compile(r"^item 0 \(image\): placeholder tokens (\d+), encoder rows (\d+), grid t·h·w/merge² (\d+) \(grid \(1, \d+, \d+\)\)$")


def _violations(found: list, check: str) -> list:
    return [f for f in found if f.check == check and f.outcome == "violation"]


def _lines(server, check: str, at_least: int) -> list:
    """The findings log once it holds `at_least` violations of `check` (written by a thread), else what it holds. A
    step-level check counts one violation a run on /metrics however many requests its run names: one line each."""
    import time

    from qdebug.engine.watch_log import read_findings

    deadline = time.monotonic() + 30
    while len(found := _violations(read_findings(str(server.watch)), check)) < at_least and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def _prefill_steps(folder) -> list[list[str]]:
    """The requests that computed prompt rows together, step by step, by the plugin's batch log."""
    return [s.prefill for s in read_batch_log(folder).steps if s.prefill]


def test_counts_fire_for_every_request_under_placeholder_shift(vllm_py, tmp_path):
    """Each image's range one token past its placeholder tokens: every request's counts disagree (one placeholder token
    fewer in the range than encoder rows), nothing else does (the merge and the rope index follow the ranges)."""
    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="placeholder-shift:1") as server:
        burst(server, distinct_images(tmp_path / "images", 8, seed=5), concurrency=8)
        series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= 8 and s.get((VIOLATIONS, "counts"), 0) >= 8)
        series, found = agreed(server, series, "counts")
        assert server.said("injected fault placeholder-shift by 1 token(s)"), server.log_text()[-4000:]
    counts = _violations(found, "counts")
    assert len(counts) == series[(VIOLATIONS, "counts")] == series[(CHECKS, "counts")] == 8, series
    assert len({f.request_id for f in counts}) == 8 and {f.stage for f in counts} == {"preprocess"}
    for f in counts:
        m = COUNTS.match(f.evidence)
        assert m and int(m[1]) == int(m[2]) - 1 and m[2] == m[3], f.evidence
    assert series[(VIOLATIONS, "placement")] == 0 and not any(v for (name, _), v in series.items() if name == ERRORS), series


def _video_body(rid: str) -> dict:
    url = "data:video/jpeg;base64," + ",".join(base64.b64encode(f).decode() for f in _frames())
    return {"model": "demo", "max_tokens": 4, "temperature": 0, "request_id": rid,
            "messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": url}}, {"type": "text", "text": VIDEO_PROMPT}]}]}


def test_positions_fire_on_flattened_temporal_ids_naming_each_video_request_and_its_step(vllm_py, tmp_path):
    """Four videos (two temporal slices of 12 rows each) among four images, every step sampled: each video request's
    prefill is a positions violation (its second slice's 12 rows carry the first slice's time), no image request's;
    the requests it names as co-batched are those of the step that computed its prompt, by the batch log."""
    images = distinct_images(tmp_path / "images", 4, seed=9)
    bodies = [b for i in range(4) for b in (_video_body(f"vid-{i}"), {**body_for(images[i], 4), "request_id": f"img-{i}"})]
    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="temporal-ids-flat", QDEBUG_VLLM_WATCH_SAMPLE="1") as server:
        send_all(server, bodies, concurrency=8)
        series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= 8 and s.get((VIOLATIONS, "positions"), 0) >= 1)
        positions = _lines(server, "positions", 4)
        steps = [s for s in read_batch_log(server.watch / "traces").steps if s.prefill]
    named = {re.search(r"(vid|img)-\d", f.request_id)[0] for f in positions}
    assert named == {f"vid-{i}" for i in range(4)} and len(positions) == 4, [f.request_id for f in positions]
    assert 1 <= series[(VIOLATIONS, "positions")] <= len(positions) and series[(ERRORS, "positions")] == 0, series
    for f in positions:
        assert f.stage == "sync" and re.match(r"^12 of \d+ rows fed this step carry other MRoPE ids", f.evidence), f.evidence
        # the step that computed its prompt rows: every other request of it (prefill and decode) is named co-batched
        assert any(f.request_id in s.prefill and set(f.cobatched) == set(s.names) - {f.request_id} for s in steps), (f, steps)
    assert series[(VIOLATIONS, "placement")] == 0 == series[(VIOLATIONS, "counts")], series


def test_logits_fire_when_the_shared_buffer_feeds_a_request_anothers_whole_rows(vllm_py, tmp_path):
    """Every step sampled: a request whose placeholders took all of another's rows (the same text otherwise) samples
    from a copy of that request's logits row. Each logits violation pairs two requests whose inputs the engine's traces
    show were one request's rows, and which shared a prefill step by the batch log."""
    from qdebug.trace.schema import load_trace

    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT="shared-visual-buffer", QDEBUG_VLLM_WATCH_SAMPLE="1", trace=True) as server:
        for attempt in range(3):
            burst(server, distinct_images(tmp_path / "images", 24, seed=attempt), concurrency=12)
            sent = 24 * (attempt + 1)
            series = settled(server, lambda s: s.get((CHECKS, "counts"), 0) >= sent)
            if series.get((VIOLATIONS, "logits"), 0):
                break
        logits = _lines(server, "logits", int(series.get((VIOLATIONS, "logits"), 0)))
    assert logits and len(logits) >= series[(VIOLATIONS, "logits")] > 0 and series[(ERRORS, "logits")] == 0, series
    traces = {p.stem: load_trace(p) for p in server.traces.glob("*.qdt")}
    steps = _prefill_steps(server.traces)

    def fed(rid: str) -> str:
        """Whose rows fill the request's placeholders, by its trace (all of them one request's)."""
        owners = row_owners({r: traces[r] for r in (rid, *[o for s in steps if rid in s for o in s]) if r in traces})[rid]
        assert len(owners) == 1, (rid, owners)
        return next(iter(owners))

    for f in logits:
        assert f.stage == "logits" and len(f.donors) == 1 and f.donors[0] in f.cobatched, f
        a, b = f.request_id, f.donors[0]
        assert f"request {a}'s logits row is an exact copy of request {b}'s, whose inputs differ" in f.evidence, f.evidence
        assert fed(a) == fed(b), (a, b)  # one request's rows fed both (a and b differ: at least one not its own)
        assert any(a in s and b in s for s in steps), (a, b, steps)
