"""Replay verdicts and offsets come from the rows the decoder received, never from what a fault says about itself."""

import json
import shutil
import time
from dataclasses import dataclass

import pytest

from qdebug.trace.protocols import FaultBase
from qdebug.vocab import EventOrigin
from tests.replay.conftest import SAMPLE


@dataclass
class SilentShift(FaultBase):
    """Moves every image row `shift` positions and says nothing about it."""

    shift: int

    def on_decoder_input(self, rec, embeds):
        out = embeds.clone()
        pos = rec.image_positions
        out[0, [p + self.shift for p in pos]] = embeds[0, pos]
        return out


@dataclass
class Liar(FaultBase):
    """Claims a desync at a shifted offset but leaves every row where it was."""

    events: object  # the request's event sink

    def on_decoder_input(self, rec, embeds):
        self.events("desync", offset=rec.image_positions[0] + 3, text_offset=rec.image_positions[0], message="injected: liar", origin=EventOrigin.FAULT)
        self.events("stitch", offset=rec.image_positions[0] + 3, tokens=len(rec.image_positions))
        return None


def _capture(tmp_path, lines):
    for name in ("req-01.png", "req-02.png", "req-03.png"):
        shutil.copy(SAMPLE / "capture" / name, tmp_path / name)
    path = tmp_path / "capture.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _req(rid, images, text="Describe the image."):
    content = [{"type": "image_url", "image_url": {"url": name}} for name in images] + [{"type": "text", "text": text}]
    return {"id": rid, "messages": [{"role": "user", "content": content}], "max_tokens": 12}


def _replay(demo, path, fault_factory=None, **settings):
    from qdebug.analysis.replay import report_from_replay
    from qdebug.replay.engine import ReplaySettings, replay
    from qdebug.replay.formats.capture import parse_capture

    batch = parse_capture(path)
    return report_from_replay(batch, replay(demo, batch, ReplaySettings(**settings), fault_factory=fault_factory))


@pytest.fixture
def small(tmp_path):
    return _capture(tmp_path, [_req("a", ["req-01.png"]), _req("b", ["req-02.png"]), _req("two", ["req-03.png", "req-01.png"])])


def test_a_fault_that_moves_rows_silently_is_found(demo, small):
    report = _replay(demo, small, fault_factory=lambda rid, events: (SilentShift(1),))
    for r in report.requests:
        assert r.verdict == "desync", r.id
        assert not r.injected  # it said nothing
        for im in r.images:
            assert im["visual_offset"] == im["text_offset"] + 1, (r.id, im)
    assert not any(e.kind == "desync" for e in report.events)


def test_a_fault_that_claims_a_shift_but_moves_nothing_is_clean(demo, small):
    report = _replay(demo, small, fault_factory=lambda rid, events: (Liar(events),))
    for r in report.requests:
        assert r.verdict == "ok", r.id
        assert r.replayed == r.reference
        assert r.visual_offset == r.text_offset
        assert all(im["visual_offset"] == im["text_offset"] for im in r.images)
        assert r.injected == ["injected: liar"]  # kept as a label
    assert not any(f.kind == "desync" for f in report.findings)


def test_every_image_of_a_request_is_measured(demo, small):
    report = _replay(demo, small, inject="offset-shift:2", concurrency=3)
    two = report.outcome("two")
    assert [im["index"] for im in two.images] == [0, 1]
    assert two.images[1]["text_offset"] > two.images[0]["text_offset"]
    for im in two.images:
        assert im["visual_offset"] == im["text_offset"] + 2 and im["rows"] > 0 and im["donor"] is None
    assert (two.text_offset, two.visual_offset) == (two.images[0]["text_offset"], two.images[0]["visual_offset"])
    doc = report.to_json()["requests"]
    assert set(doc[2]["images"][1]) >= {"index", "text_offset", "visual_offset", "rows", "donor"}
    assert all(label.startswith("injected: offset-shift:2") for label in two.injected)


def test_batched_offsets_are_measured_not_copied(demo, small):
    report = _replay(demo, small, mode="batched")
    for r in report.requests:
        assert r.verdict == "ok"
        assert all(im["visual_offset"] == im["text_offset"] for im in r.images) and len(r.images) == (2 if r.id == "two" else 1)


def test_clean_replays_emit_no_buffer_events(demo, small):
    for mode in ("threads", "batched"):
        report = _replay(demo, small, mode=mode)
        kinds = {e.kind for e in report.events}
        assert not kinds & {"buffer_write", "buffer_overwrite"}, mode
        assert "encode_start" in kinds and "first_token" in kinds


def test_requests_without_images_are_never_stalled(demo, tmp_path):
    path = _capture(tmp_path, [_req("a", ["req-01.png"]), {"id": "text", "messages": [{"role": "user", "content": "Describe the image."}], "max_tokens": 6},
                               _req("b", ["req-02.png"]), _req("c", ["req-03.png"])])
    start = time.monotonic()
    report = _replay(demo, path, inject="shared-visual-buffer", seed=3, concurrency=4)
    assert time.monotonic() - start < 120  # the old schedule waited 600 s for the text-only request's turns
    assert all(r.verdict != "error" for r in report.requests), [(r.id, r.error) for r in report.requests]
    text = report.outcome("text")
    assert text.replayed == text.reference and text.images == []
    assert not any(e.request_id == "text" and e.kind.startswith("buffer") for e in report.events)
