"""The plugin's batch log on disk, without vLLM: bounded (two generations), whole lines, only the folder's own file,
and read back in order by the reader the replay calls."""

from __future__ import annotations

import json
import os

import pytest

from qdebug.engine.batch_log import BATCH_LOG, BATCH_LOG_OLD, BATCH_STEP, ENCODER_CALL, read_batch_log
from qdebug.engine.batch_record import BatchLogFile


def step_line(n: int, names: list[str]) -> bytes:
    return (json.dumps({"record": BATCH_STEP, "worker": 7, "step": n, "prefill": names[:1], "decode": names[1:]}) + "\n").encode()


def call_line(n: int, step: int, items: list) -> bytes:
    return (json.dumps({"record": ENCODER_CALL, "worker": 7, "call": n, "step": step, "modality": "image", "items": items}) + "\n").encode()


def test_the_log_rotates_at_its_bound_and_the_reader_keeps_order(tmp_path):
    out = BatchLogFile(tmp_path, max_bytes=400)
    for n in range(1, 21):
        out.append(step_line(n, [f"r{n}", f"r{n - 1}"]) + call_line(n, n, [[f"r{n}", 0], [f"r{n - 1}", 1]]))
    assert (tmp_path / BATCH_LOG).stat().st_size <= 400 and (tmp_path / BATCH_LOG_OLD).stat().st_size <= 400
    assert sorted(os.listdir(tmp_path)) == [BATCH_LOG_OLD, BATCH_LOG]  # two generations, never more
    log = read_batch_log(tmp_path)
    steps = [s.step for s in log.steps]
    assert steps == list(range(steps[0], 21)) and steps[0] > 1  # the oldest are gone, the rest in the order written
    assert log.partners("r20") == {ENCODER_CALL: {"r19"}, BATCH_STEP: {"r19"}}
    assert [c.items for c in log.calls_of("r19")] == [[("r19", 0), ("r18", 1)], [("r20", 0), ("r19", 1)]]
    shared = log.shared({"r20"})
    assert shared.described() == "1 encoder call of 2 items; 1 step with up to 2 requests"


def test_a_torn_or_foreign_line_is_skipped(tmp_path):
    (tmp_path / BATCH_LOG).write_bytes(step_line(1, ["a", "b"])[:-20] + b"\n" + b'{"record": "batch_step", "step": "x"}\n'
                                       + b"[1, 2]\n" + call_line(1, 2, [["a", 0], ["b", 0]]))
    log = read_batch_log(tmp_path)
    assert log.steps == [] and [c.names for c in log.encoder_calls] == [["a", "b"]]


def test_a_link_in_place_of_the_log_is_neither_written_nor_read(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(step_line(1, ["secret"]))
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / BATCH_LOG).symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        BatchLogFile(folder)
    assert read_batch_log(folder).steps == []
    assert outside.read_bytes() == step_line(1, ["secret"])
