"""Re-execution of a captured burst: clean modes agree with isolated references; injected faults are found."""

import torch

from qdebug.replay.engine import encoded_rows, landed_rows


def test_clean_threads_equal_references(clean_threads):
    assert len(clean_threads.requests) == 14
    for r in clean_threads.requests:
        assert r.replayed == r.reference, r.id
        assert r.text_offset == r.visual_offset
    for rid, trace in clean_threads.traces.items():
        assert torch.equal(landed_rows(trace), encoded_rows(clean_threads.references[rid]))
    assert not any(f.kind in ("contamination", "mixed_rows", "overwrite") for f in clean_threads.findings)


def test_clean_batched_equal_references(clean_batched):
    for r in clean_batched.requests:
        assert r.replayed == r.reference, r.id
        assert r.first_token_kl is not None and abs(r.first_token_kl) < 1e-6
        assert r.first_token_topk_overlap == 1.0
    ids = clean_batched.contamination_ids
    for i, rid in enumerate(ids):  # each stream holds its own rows
        assert clean_batched.contamination[i][i] >= 0.9999


def test_shared_buffer_contaminates_reproducibly(faulty, replay_with):
    contaminated = [r for r in faulty.requests if r.verdict == "contaminated" and r.replayed != r.reference]
    assert contaminated
    rows = {rid: encoded_rows(t).shape[0] for rid, t in faulty.references.items()}
    wholesale = [r for r in faulty.requests if r.verdict == "contaminated" and rows[r.id] == rows[r.donor] and r.id in faulty.traces]
    assert wholesale, "expected at least one same-row-count overwrite in the sample"
    for r in wholesale:
        assert r.replayed == faulty.outcome(r.donor).reference
        assert any(f.kind == "contamination" and f.request_id == r.id and f.donor == r.donor for f in faulty.findings)
    # The same seed replays the same interleaving.
    again = replay_with(mode="threads", concurrency=4, inject="shared-visual-buffer", seed=0)
    assert [(r.verdict, r.donor, r.replayed) for r in again.requests] == [(r.verdict, r.donor, r.replayed) for r in faulty.requests]
    assert [(e.kind, e.request_id, e.donor) for e in again.events if e.kind == "buffer_overwrite"] == \
           [(e.kind, e.request_id, e.donor) for e in faulty.events if e.kind == "buffer_overwrite"]


def test_partial_overwrite_is_mixed_and_flagged(faulty):
    mixed = [r for r in faulty.requests if r.verdict == "desync"]
    assert mixed
    for r in mixed:
        kinds = {f.kind for f in faulty.findings if f.request_id == r.id}
        assert "mixed_rows" in kinds
        i = faulty.contamination_ids.index(r.id)
        assert max(v for v in faulty.contamination[i] if v is not None) < 0.9999
    assert any(e.kind == "shape_mismatch" for e in faulty.events)


def test_clean_requests_in_a_faulty_run_equal_their_reference(faulty):
    for r in faulty.requests:
        trace = faulty.traces.get(r.id)
        if trace is not None and torch.equal(landed_rows(trace), encoded_rows(faulty.references[r.id])):
            assert r.replayed == r.reference, r.id
            assert r.verdict == "ok", r.id  # production's `observed` answer is judged beside it (observed_verdict), never into it


def test_overwrite_events_name_victim_and_donor(faulty):
    overwrites = [e for e in faulty.events if e.kind == "buffer_overwrite"]
    assert overwrites and all(e.donor and e.request_id != e.donor for e in overwrites)
    victims = {r.id for r in faulty.requests if r.verdict in ("contaminated", "desync") and r.id in faulty.traces}
    assert victims <= {e.request_id for e in overwrites}


def test_offset_shift_desyncs_every_request(replay_with):
    report = replay_with(mode="threads", concurrency=2, inject="offset-shift:2")
    for r in report.requests:
        assert r.verdict == "desync", r.id
        assert r.visual_offset == r.text_offset + 2
    assert any(f.kind == "desync" for f in report.findings)


def test_cancel_keeps_what_finished(demo):
    import threading

    from qdebug.analysis.replay import report_from_replay
    from qdebug.replay.engine import ReplaySettings, replay
    from qdebug.replay.formats.capture import parse_capture
    from tests.replay.conftest import SAMPLE

    batch = parse_capture(SAMPLE / "capture.jsonl")
    cancel = threading.Event()
    done = []

    def progress(phase, rid, clean):
        done.append(rid)
        if len(done) == 3:
            cancel.set()

    run = replay(demo, batch, ReplaySettings(), progress, cancel)
    report = report_from_replay(batch, run)
    assert run.interrupted and report.interrupted
    assert 3 <= len(run.references) < 14
    assert sum(r.verdict == "error" for r in report.requests) >= 14 - len(run.references)
