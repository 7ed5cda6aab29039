"""The watch's parts that need no engine: the findings line format (read back exactly, bounded, rotated), the placement
and counts checks on tensors laid out as vLLM lays them, the counters' files summed per run, bad settings said."""

from __future__ import annotations

import logging

import pytest

import torch

from qdebug.engine.watch_checks import Item, check_counts, check_placement, project, projection, step_positions
from qdebug.engine.watch_log import FindingsLog, WatchFinding, format_line, parse_line, read_findings
from qdebug.engine.watch_metrics import WatchCounters, read_counters
from qdebug.engine.watch_settings import read_settings


def test_a_findings_line_reads_back_whatever_its_ids_hold():
    f = WatchFinding("placement", "violation", "sync", "id with spaces,=%", "24 of 24 rows ... from b\nsecond line",
                     client_id="client 7", donors=["b,1", "c"], cobatched=["x"], trace="traces/a.qdt", host="gpu-3",
                     time="2026-12-04T18:50:01.000001Z")
    line = format_line(f)
    assert "\n" not in line and line.startswith("2026-12-04T18:50:01.000001Z ERROR qdebug.watch: host=gpu-3 check=placement ")
    back = parse_line(line + "\n")
    assert back.to_json() == {**f.to_json(), "evidence": "24 of 24 rows ... from b second line"}
    assert parse_line("2026-12-04T18:50:01Z INFO something else: request_id=1 wrote 3 tokens") is None
    assert parse_line(line.replace("check=placement", "checks=placement")) is None


def test_the_log_rotates_at_its_bound_and_reads_oldest_first(tmp_path):
    log = FindingsLog(str(tmp_path), 4096)
    for i in range(60):
        log.add(WatchFinding("counts", "violation", "preprocess", f"req-{i:02d}", "x" * 100))
    log.drain()
    sizes = [p.stat().st_size for p in sorted(tmp_path.glob("findings.log*"))]
    assert len(sizes) == 2 and all(s <= 4096 for s in sizes), sizes
    ids = [f.request_id for f in read_findings(str(tmp_path))]
    assert ids == sorted(ids) and ids[-1] == "req-59" and len(ids) < 60  # the oldest rotated out


def _item(rows: int, offset: int = 3) -> Item:
    return Item(0, "image", "h0", offset, rows, list(range(offset, offset + rows)), (1, 4, 2 * rows // 2))


def test_placement_names_the_donor_whose_encoder_rows_landed():
    torch.manual_seed(0)
    own, donor, third = torch.randn(8, 32), torch.randn(8, 32), torch.randn(8, 32)
    m = projection(32, "cpu")
    landed = torch.cat([donor[:5], own[5:7], torch.randn(1, 32)])  # 5 of b's rows, 2 own, 1 no one's
    live = [(["a"], project(own, m)), (["b"], project(donor, m)), (["c", "d"], project(third, m))]
    result = check_placement("a", _item(8), project(landed, m), project(own, m), lambda: iter(live))
    assert (result.wrong, result.donors, result.shifted, result.unmatched) == (6, {"b": 5}, 0, 1)
    shifted = check_placement("a", _item(8), project(own.flip(0), m), project(own, m), lambda: iter(live))
    assert (shifted.wrong, shifted.donors, shifted.shifted) == (8, {}, 8)
    clean = check_placement("a", _item(8), project(own, m), project(own, m), lambda: iter(()))
    assert clean.wrong == 0 and clean.compared == 8


def test_step_positions_follow_chunked_prefill():
    item = _item(10, offset=5)  # placeholders at prompt positions 5..14
    assert step_positions(item, 0, 8) == ([5, 6, 7], [0, 1, 2])
    assert step_positions(item, 8, 8) == ([0, 1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 7, 8, 9])
    assert step_positions(item, 16, 1) == ([], [])


def test_counts_name_each_count_that_disagrees():
    item = Item(0, "image", "h", 1, 4, [1, 2, 3, 4], (1, 4, 4))  # 16 patches / merge 2² = 4
    ids = [9, 7, 7, 7, 7, 9]
    assert check_counts(item, ids, 7, 4, 2) is None
    assert check_counts(item, ids, 7, 3, 2) == "placeholder tokens 4, encoder rows 3, grid t·h·w/merge² 4 (grid (1, 4, 4))"
    assert "placeholder tokens 3" in check_counts(item, [9, 7, 7, 9, 7, 9], 7, 4, 2)


def test_counter_files_are_summed_per_run(tmp_path):
    a, b, other = (WatchCounters(str(tmp_path), run) for run in ("r1", "r1", "r2"))
    a.path, b.path = str(tmp_path / "metrics-r1-1.json"), str(tmp_path / "metrics-r1-2.json")  # two workers of one run
    a.add("placement", seconds=0.5, violations=2)
    b.add("placement", seconds=0.25)
    b.add("counts", seconds=0.1, error=True)
    other.add("placement", seconds=9, violations=1)
    for c in (a, b, other):
        c.flush()
    (tmp_path / "metrics-r1-3.json").write_text("{half")
    got = read_counters(str(tmp_path), "r1")
    assert got["checks"]["placement"] == 2 and got["violations"]["placement"] == 1 and got["errors"]["counts"] == 1
    assert got["seconds"]["placement"] == 0.75 and got["workers"] == 2
    assert got["clock"] == {"steps": 0, "step_seconds": 0, "own_seconds": 0}  # these workers had no clock


def test_the_workers_clocks_are_written_when_they_move_and_summed(tmp_path):
    from qdebug.engine.plugin_clock import PluginClock

    clocks = [PluginClock(), PluginClock()]
    counters = [WatchCounters(str(tmp_path), "r1", clock) for clock in clocks]
    for k, (clock, c) in enumerate(zip(clocks, counters)):
        c.path = str(tmp_path / f"metrics-r1-{k}.json")
        clock.steps, clock.step_seconds, clock.own_seconds = 10 * (k + 1), 1.5 * (k + 1), 0.03 * (k + 1)
        c.flush()
    clocks[0].steps, clocks[0].step_seconds = 11, 1.6  # one more step: no check ran, the file is written anyway
    counters[0].flush()
    got = read_counters(str(tmp_path), "r1")["clock"]
    assert got["steps"] == 31 and got["step_seconds"] == pytest.approx(1.6 + 3.0) and got["own_seconds"] == pytest.approx(0.09)


def test_bad_settings_are_said_and_replaced_by_defaults(monkeypatch, caplog):
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_SAMPLE", "nan")
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_LOG_MB", "²")
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_RAISE", "placement,colour")
    with caplog.at_level(logging.ERROR, logger="vllm.qdebug"):
        settings = read_settings()
    assert settings.sample == 0.01 and settings.log_bytes == 16 << 20 and settings.raising == {"placement"}
    text = caplog.text
    assert "QDEBUG_VLLM_WATCH_SAMPLE='nan'" in text and "QDEBUG_VLLM_WATCH_LOG_MB='²'" in text and "colour" in text


def _runner_at(rank: int, size: int):
    """A runner's config as vLLM's worker holds it: the global rank and the tensor-parallel size (no model)."""
    from types import SimpleNamespace

    return SimpleNamespace(vllm_config=SimpleNamespace(parallel_config=SimpleNamespace(tensor_parallel_size=size, rank=rank)))


def test_only_tensor_parallel_rank_zero_watches(tmp_path, monkeypatch):
    """Under tensor parallelism a request is checked once: ranks other than 0 install nothing and write nothing."""
    from qdebug.engine.watch_engine import attach_watch, tensor_parallel_rank

    assert [tensor_parallel_rank(_runner_at(r, 2)) for r in range(4)] == [0, 1, 0, 1]
    assert tensor_parallel_rank(_runner_at(3, 1)) == 0  # no tensor parallelism: every worker is rank 0
    folder = tmp_path / "watch"
    monkeypatch.setenv("QDEBUG_VLLM_WATCH_DIR", str(folder))
    for rank in (1, 3, 5):
        runner = _runner_at(rank, 4)
        assert attach_watch(runner) is None
        assert not hasattr(runner, "_qdebug_watch") and not folder.exists()
    # rank 0 goes on to watch: with no model to wrap it fails there, past the gate (the plugin logs it and serves on)
    try:
        attach_watch(_runner_at(4, 4))
    except AttributeError as exc:
        assert "model" in str(exc) or "execute_model" in str(exc)
    else:
        raise AssertionError("rank 0 did not try to watch")


def test_an_encoder_calls_inputs_split_into_each_items_own():
    """Item k alone gets its own t·h·w patch rows and its grid row; inputs that do not add up are not split."""
    from qdebug.engine.watch_encoder import item_inputs, row_difference

    grid = torch.tensor([[1, 2, 2], [1, 4, 2], [2, 2, 2]])
    pixels = torch.arange(20 * 3, dtype=torch.float32).reshape(20, 3)
    second = item_inputs({"pixel_values": pixels, "image_grid_thw": grid}, "image", 1)
    assert torch.equal(second["pixel_values"], pixels[4:12]) and second["image_grid_thw"].tolist() == [[1, 4, 2]]
    third = item_inputs({"pixel_values_videos": pixels, "video_grid_thw": grid}, "video", 2)
    assert torch.equal(third["pixel_values_videos"], pixels[12:20])
    assert item_inputs({"pixel_values": pixels[:19], "image_grid_thw": grid}, "image", 0) is None
    assert item_inputs({"pixel_values": pixels, "image_grid_thw": grid}, "audio", 0) is None
    rows = torch.randn(6, 16)
    assert row_difference(rows, rows) == 0.0
    shifted = rows.clone()
    shifted[3] += rows[3].norm() / 32  # one row off by an eighth of its norm (16 equal parts of norm/32 each: 4 * norm/32)
    assert 0.12 < row_difference(shifted, rows) < 0.13
    assert row_difference(rows[:5], rows) == float("inf")
