"""Output files are written whole or not at all, and special files are written into, never replaced."""

import os
import stat

import pytest

from qdebug.atomic import atomic_path


def test_success_replaces_and_failure_leaves_nothing(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    with atomic_path(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()


def test_device_and_fifo_targets_are_written_into(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    with atomic_path(fifo) as path:
        path.write_text("through the pipe")
    assert os.read(reader, 100) == b"through the pipe"
    os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with atomic_path("/dev/null") as path:
        path.write_text("discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
