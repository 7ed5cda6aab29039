"""Issue 11 case 4: the runtime-log parser is linear in the line length; over-long lines are unknown, not examined."""

from __future__ import annotations

import time

import pytest

from qdebug.replay.formats.runtime_log import MAX_LINE_BYTES, parse_runtime_log, recognise_line

# Lines built to make a backtracking regex go quadratic: each repeats a trigger word with no valid ending.
ADVERSARIAL = {
    "encode_image": "encode_image ",
    "quoted id": 'request_id="',
    "single-quoted id": "request_id='",
    "offset spaces": "stitch request_id=1 offset " + " " * 64,
    "overwrote": "request_id=1 overwrote buffer (previously ",
    "digits": "request_id=1 wrote 1",
    "tokens": "request_id=1 stitch 9 ",
    "exception": "TokenStreamDesync request_id=1 visual offset ",
}
# Generous: the super-linear parser took 10 s at 104 KB and more than two minutes at 1 MB.
SECONDS_PER_MB = 3.0


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_line_costs_linear_time(name):
    unit = ADVERSARIAL[name]
    line = (unit * (MAX_LINE_BYTES // len(unit)))[: MAX_LINE_BYTES - 1]
    t0 = time.perf_counter()
    recognise_line(line)
    assert time.perf_counter() - t0 < SECONDS_PER_MB, f"{name}: one {len(line):,}-char line took too long"


def test_quarter_and_full_line_cost_scales_linearly():
    """The case from the report: 'encode_image ' repeated; 4x the length must not cost 16x the time."""
    unit = "encode_image "
    small = unit * (256 * 1024 // len(unit))
    big = unit * (1024 * 1024 // len(unit) - 1)
    best = {}
    for label, line in (("small", small), ("big", big)):
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            recognise_line(line)
            times.append(time.perf_counter() - t0)
        best[label] = min(times)
    assert best["big"] < SECONDS_PER_MB
    # Quadratic would be 16x; allow noise on a busy machine but not the square.
    assert best["big"] < max(10 * best["small"], 0.05)


def test_line_longer_than_the_cap_is_unknown_and_parsing_goes_on(tmp_path):
    p = tmp_path / "long.log"
    with open(p, "wb") as f:
        f.write(b"2024-07-12T14:23:07Z DEBUG VisualEncoder::encode_image: request_id=1 start " + b"encode_image " * (MAX_LINE_BYTES // 13 + 10) + b"\n")
        f.write(b"2024-07-12T14:23:08Z DEBUG VisualEncoder::encode_image: request_id=2 start\n")
    t0 = time.perf_counter()
    batch = parse_runtime_log(p)
    assert time.perf_counter() - t0 < SECONDS_PER_MB
    assert (batch.total_lines, batch.unknown_lines) == (2, 1)
    assert [(e.request_id, e.line) for e in batch.events] == [("2", 2)]


def test_line_at_the_cap_via_cli_is_counted_unknown(tmp_path):
    from typer.testing import CliRunner

    from qdebug.cli import app

    p = tmp_path / "svc.log"
    with open(p, "wb") as f:
        f.write(b"2024-07-12T14:23:07Z DEBUG VisualEncoder::write_buffer: request_id=1 wrote 4 tokens at offset 0\n")
        f.write(b"request_id=" + b"x" * (2 * MAX_LINE_BYTES) + b"\n")
        f.write(b"2024-07-12T14:23:08Z DEBUG TokenSynchronizer::stitch: request_id=1 consumed 4 tokens at offset 0\n")
    result = CliRunner().invoke(app, ["replay", str(p), "--json", "-"], env={"QDEBUG_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.stdout)
    assert doc["unknown_lines"] == 1
    assert [e["kind"] for e in doc["events"]] == ["buffer_write", "stitch"]
    assert [e["line"] for e in doc["events"]] == [1, 3]
