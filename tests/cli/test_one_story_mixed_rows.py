"""One replay, one story: a mixed stream's shares add up to its rows, and the JSON names the donor the message names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
HEAD = re.compile(r"holds a mix of visual rows: of its (?P<total>\d+) rows, (?P<parts>.+)$")
PART = re.compile(r"^(?P<n>\d+) \((?P<pct>\d+)%\) (?:are (?P<who>its own|\S+)'s|are its own|match no request's)$")
WRITTEN = re.compile(r"buffer holds (?P<n>\d+) rows written by request (?P<donor>\S+);")


@pytest.fixture(scope="module")
def injected(tmp_path_factory) -> dict:
    """The JSON of the README's injected replay of the sample capture."""
    out = tmp_path_factory.mktemp("mixed") / "r.json"
    result = CliRunner().invoke(app, ["replay", str(SAMPLE / "capture.jsonl"), "--inject", "shared-visual-buffer", "--seed", "0",
                                      "--json", str(out)])
    assert out.exists(), result.output
    return json.loads(out.read_text())


def _shares(message: str) -> tuple[int, list[tuple[str, int, int]]]:
    """(rows of the stream, [(whose, rows, percent)]) as the message states them."""
    head = HEAD.search(message)
    assert head, message
    parts = []
    for part in head["parts"].split(", "):
        m = PART.match(part)
        assert m, part
        whose = m["who"] or ("own" if "its own" in part else "unmatched")
        parts.append((whose, int(m["n"]), int(m["pct"])))
    return int(head["total"]), parts


def test_mixed_rows_shares_add_up_to_the_stream(injected):
    mixed = [f for f in injected["findings"] if f["kind"] == "mixed_rows"]
    assert mixed  # the injected fault leaves partly overwritten streams
    requests = {r["id"]: r for r in injected["requests"]}
    for f in mixed:
        total, parts = _shares(f["message"])
        assert sum(n for _, n, _ in parts) == total, f["message"]
        assert abs(sum(p for _, _, p in parts) - 100) <= 1, f["message"]
        assert len({w for w, _, _ in parts}) == len(parts), f["message"]  # each row counted once, each owner named once
        donors = [w for w, _, _ in parts if w not in ("own", "unmatched")]
        # The JSON's donor (the finding's and the request's) is the first request the message names.
        assert f["donor"] == (donors[0] if donors else None), f
        assert requests[f["request_id"]]["donor"] == f["donor"], requests[f["request_id"]]


def test_mixed_rows_agree_with_the_buffer_events(injected):
    """Where the run's own event says how many rows a donor wrote into the stream, the finding counts the same."""
    checked = 0
    for f in (f for f in injected["findings"] if f["kind"] == "mixed_rows"):
        counts = {w: n for w, n, _ in _shares(f["message"])[1]}
        for e in injected["events"]:
            written = WRITTEN.search(e["message"]) if e["request_id"] == f["request_id"] and e["kind"] == "shape_mismatch" else None
            if written:
                assert counts.get(written["donor"]) == int(written["n"]), (f["message"], e["message"])
                checked += 1
    assert checked
