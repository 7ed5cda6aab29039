"""Findings, verdicts and offsets from hand-built event lists."""

from __future__ import annotations

from qdebug.analysis.detectors.log_findings import (
    contamination_from_events,
    findings_from_events,
    offsets_from_events,
    request_verdicts_from_events,
)
from qdebug.replay.batch import Batch, BatchRequest, Event
from qdebug.vocab import EventKind


def ev(kind, rid, **kw) -> Event:
    """An event with seq/line left to the caller."""
    return Event(kind, rid, **kw)


def overwrite(victim, donor, offset=0, line=None) -> Event:
    """`donor` overwrote `victim`'s buffer."""
    return Event(EventKind.BUFFER_OVERWRITE, victim, donor=donor, offset=offset, line=line)


def stitch(rid) -> Event:
    """`rid` stitched its visual tokens."""
    return Event(EventKind.SYNC, rid, tokens=256, offset=0)


def test_overwrite_before_stitch_contaminates_after_does_not():
    events = [
        ev(EventKind.BUFFER_WRITE, "a", offset=0, tokens=256),
        overwrite("a", "b"),
        stitch("a"),
        ev(EventKind.BUFFER_WRITE, "c", offset=256, tokens=256),
        stitch("c"),
        overwrite("c", "d"),  # after c consumed its tokens: harmless
    ]
    assert contamination_from_events(events) == {"a": "b"}


def test_without_a_stitch_any_overwrite_counts_and_self_overwrites_never_do():
    events = [overwrite("a", "b"), overwrite("e", "e"), stitch("e")]
    assert contamination_from_events(events) == {"a": "b"}
    assert contamination_from_events([overwrite("x", "x")]) == {}


def test_last_donor_before_the_stitch_wins():
    events = [overwrite("a", "b"), overwrite("a", "c"), stitch("a"), overwrite("a", "d")]
    assert contamination_from_events(events) == {"a": "c"}
    assert contamination_from_events(iter(events)) == {"a": "c"}  # any iterable


def test_findings_per_event_in_order():
    events = [
        ev(EventKind.ENCODE_START, "a", line=1),
        overwrite("a", "b", offset=256, line=3),
        stitch("a"),
        overwrite("a", "z", offset=512, line=5),  # after the stitch: no finding
        ev(EventKind.DESYNC, "a", offset=256, text_offset=0, line=6),
        ev(EventKind.SHAPE_MISMATCH, None, message="VisualEmbeddingShapeMismatchError: expected shape (batch, seq_len, dim) but got (batch, dim)", line=7),
        ev(EventKind.INDEX_OUT_OF_BOUNDS, "c", offset=1024, tokens=768, line=8),
        ev(EventKind.FIRST_TOKEN, "a", line=9),
    ]
    findings = findings_from_events(events)
    assert [(f.kind, f.severity, f.request_id, f.donor) for f in findings] == [
        ("contamination", "error", "a", "b"),
        ("desync", "warning", "a", None),
        ("shape_mismatch", "error", None, None),
        ("index_out_of_bounds", "error", "c", None),
    ]
    assert all(f.stage is None for f in findings)
    contamination, desync, shape, oob = (f.message for f in findings)
    assert "a" in contamination and "b" in contamination and "offset 256" in contamination and "line 3" in contamination
    assert "256" in desync and "offset 0" in desync and "line 6" in desync
    assert "expected shape (batch, seq_len, dim) but got (batch, dim)" in shape and "line 7" in shape
    assert oob == "token index 1024 exceeds sequence length 768 (line 8)"


def test_verdict_precedence():
    batch = Batch(
        source="<test>",
        kind="runtime-log",
        requests=[BatchRequest(r) for r in ("both", "desync_err", "err", "fine", "donor")],
        events=[
            ev(EventKind.DESYNC, "both", offset=1, text_offset=0),
            overwrite("both", "donor"),
            ev(EventKind.SHAPE_MISMATCH, "desync_err"),
            ev(EventKind.DESYNC, "desync_err", offset=1, text_offset=0),
            ev(EventKind.INDEX_OUT_OF_BOUNDS, "err", offset=9, tokens=8),
            ev(EventKind.SHAPE_MISMATCH, None),  # no request id: blames nobody
            ev(EventKind.INDEX_OUT_OF_BOUNDS, None, offset=9, tokens=8),
            ev(EventKind.FIRST_TOKEN, "fine"),
        ],
    )
    assert request_verdicts_from_events(batch) == {
        "both": "contaminated",
        "desync_err": "desync",
        "err": "error",
        "fine": "ok",
        "donor": "ok",
    }


def test_verdicts_cover_event_only_ids_and_capture_errors():
    batch = Batch(
        source="<test>", kind="capture",
        requests=[BatchRequest("bad", error="bad JSON"), BatchRequest("good")],
        events=[overwrite("late", "good")],
    )
    assert request_verdicts_from_events(batch) == {"bad": "error", "good": "ok", "late": "contaminated"}


def test_offsets_from_desync_else_own_write():
    events = [
        ev(EventKind.BUFFER_WRITE, "a", offset=0, tokens=256),
        ev(EventKind.DESYNC, "a", offset=256, text_offset=0),
        ev(EventKind.DESYNC, "a", offset=384, text_offset=16),  # the last desync wins
        ev(EventKind.BUFFER_WRITE, "b", offset=256, tokens=256),
        ev(EventKind.BUFFER_WRITE, "b", offset=512, tokens=256),
        overwrite("b", "c", offset=512),  # c's own write, landing on b's slot
        ev(EventKind.DESYNC, None, offset=1, text_offset=0),
        ev(EventKind.ENCODE_START, "d"),
    ]
    assert offsets_from_events(events) == {"a": (16, 384), "b": (None, 512), "c": (None, 512)}


def test_sample_burst_log_verdicts():
    from pathlib import Path

    from qdebug.replay.formats.runtime_log import parse_runtime_log

    batch = parse_runtime_log(Path(__file__).resolve().parents[2] / "sample_data" / "burst.log")
    assert contamination_from_events(batch.events) == {"42": "43", "45": "46"}
    assert request_verdicts_from_events(batch) == {
        "41": "ok", "42": "contaminated", "43": "ok", "44": "ok",
        "45": "contaminated", "46": "error", "47": "error", "48": "ok",
    }
    assert [f.kind for f in findings_from_events(batch.events)] == [
        "contamination", "desync", "contamination", "shape_mismatch", "desync", "index_out_of_bounds"
    ]
