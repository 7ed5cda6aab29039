"""One replay, one story: every overwrite and sync label the timeline PNG draws says what the JSON and its findings say."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.render.offset_timeline import drawn_labels

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
OVERWRITE = re.compile(r"^(?P<donor>\S+)→(?P<victim>\S+)@(?P<offset>\d+)(?P<note> \(after sync\)| \(its own rows\))?$")
SYNC = re.compile(r"^\S+ (?P<rid>\S+): visual@(?P<visual>\d+|–)(?: text@(?P<text>\d+))?(?: rows of (?P<donor>\S+))?$")


def _run(tmp_path: Path, *args: str) -> tuple[dict, list[str]]:
    """Run `qdebug replay ARGS` once, writing the PNG and the JSON; (the JSON, the labels the PNG shows)."""
    png, out = tmp_path / "t.png", tmp_path / "r.json"
    result = CliRunner().invoke(app, ["replay", *args, "--timeline-png", str(png), "--json", str(out)])
    assert png.exists() and out.exists(), result.output
    return json.loads(out.read_text()), drawn_labels(png)


@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    """The README's injected replay of the sample capture."""
    return _run(tmp_path_factory.mktemp("injected"), str(SAMPLE / "capture.jsonl"), "--inject", "shared-visual-buffer", "--seed", "0")


@pytest.fixture(scope="module")
def burst_log(tmp_path_factory):
    """A runtime log (held out from the capture): contaminating, after-sync and self overwrites."""
    return _run(tmp_path_factory.mktemp("log"), str(SAMPLE / "burst.log"))


def _check_labels_against_json(data: dict, labels: list[str]) -> None:
    events = sorted(data["events"], key=lambda e: e["seq"])
    synced_at: dict[str, list[int]] = {}
    for e in events:
        if e["kind"] == "stitch":
            synced_at.setdefault(e["request_id"], []).append(e["seq"])
    # a fault's own events (origin "fault") are labels, never drawn: only observed overwrites are
    overwrites = [e for e in events if e["kind"] == "buffer_overwrite" and e.get("origin") != "fault"]
    drawn = [m for m in map(OVERWRITE.match, labels) if m]
    for m in drawn:
        donor, victim, offset = m["donor"], m["victim"], int(m["offset"])
        event = next(e for e in overwrites if (e["donor"], e["request_id"], e["offset"]) == (donor, victim, offset))
        last_sync = max(synced_at.get(victim, [-1]))
        if m["note"] == " (after sync)":
            assert event["seq"] > last_sync >= 0, f"{m[0]}: the JSON has {victim} synced after this overwrite"
        elif m["note"] == " (its own rows)":
            assert donor == victim
        else:  # drawn as contaminating: the victim had not synced yet, as the JSON's times say
            assert donor != victim and (last_sync < 0 or event["seq"] < last_sync), m[0]
    # The plain labels are exactly the overwrites the findings call "before it was stitched".
    said = Counter((f["donor"], f["request_id"]) for f in data["findings"] if "before it was stitched" in f["message"])
    plain = Counter((m["donor"], m["victim"]) for m in drawn if m["note"] is None)
    assert plain == said, (plain, said)
    assert len(drawn) == len(overwrites)  # none left out: every overwrite carries its label
    requests = {r["id"]: r for r in data["requests"]}
    syncs = [m for m in map(SYNC.match, labels) if m]
    assert syncs, labels
    for m in syncs:
        r = requests[m["rid"]]
        visual = None if m["visual"] == "–" else int(m["visual"])
        assert visual == r["visual_offset"], (m[0], r)
        if m["text"] is not None:
            assert int(m["text"]) == r["text_offset"], (m[0], r)
        assert (m["donor"] or None) == (r["donor"] or None), (m[0], r)  # the same donor as the table and the findings


def test_injected_replay_timeline_labels_agree_with_the_json(injected):
    data, labels = injected
    _check_labels_against_json(data, labels)
    # The buffer's overwrites are the fault's own labels (origin "fault"): none is drawn; the syncs name the donors
    # whose rows were measured in each stream, as the table and the findings do (issue 36: req-06 got req-08's rows).
    assert not [m for m in map(OVERWRITE.match, labels) if m], labels
    assert any(e.get("origin") == "fault" and e["kind"] == "buffer_overwrite" for e in data["events"])
    assert "S req-06: visual@3 text@3 rows of req-08" in labels


def test_runtime_log_timeline_labels_agree_with_the_json(burst_log):
    data, labels = burst_log
    _check_labels_against_json(data, labels)
    assert "48→47@1024 (after sync)" in labels and "43→42@256" in labels
