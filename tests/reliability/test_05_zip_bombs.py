"""Item 5: trace files whose members expand far beyond their size are refused from their headers, in little memory."""

from __future__ import annotations

import os
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from qdebug.errors import TraceFormatError
from qdebug.replay.report import load_report
from qdebug.trace.schema import load_trace

from .conftest import one_line_error, qdebug

DATA = Path(__file__).resolve().parents[1] / "data"


def _bomb(path: Path, source: Path, json_name: str, member: str, mib: int) -> Path:
    """Copy `source`'s JSON member and add `member` holding `mib` MiB of zeros (deflated ~230:1)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(json_name, src.read(json_name))
        with zf.open(member, "w", force_zip64=True) as f:
            chunk = bytes(16 << 20)
            for _ in range(mib // 16):
                f.write(chunk)
    return path


@pytest.fixture(scope="module")
def qdt_bomb(tmp_path_factory):
    return _bomb(tmp_path_factory.mktemp("zb") / "bomb.qdt", DATA / "red_circle.qdt", "trace.json", "tensors.safetensors", 512)


def test_qdt_bomb_is_refused_without_expanding(qdt_bomb):
    assert qdt_bomb.stat().st_size < 4 << 20
    load_trace(DATA / "red_circle.qdt")  # imports (torch, safetensors, jsonschema) happen outside the measurement
    tracemalloc.start()
    try:
        with pytest.raises(TraceFormatError, match=r"tensors\.safetensors expands .*:1.*zip bomb"):
            load_trace(qdt_bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20  # the 512 MiB member was never read into memory


def test_qdt_bomb_on_the_command_line_is_one_line(qdt_bomb):
    proc = qdebug("diff", qdt_bomb, DATA / "red_circle.qdt")
    one_line_error(proc, "bomb.qdt", "zip bomb")
    assert proc.returncode == 2


def test_declared_size_over_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "big.qdt"
    with zipfile.ZipFile(DATA / "red_circle.qdt") as src, zipfile.ZipFile(path, "w") as zf:
        zf.writestr("trace.json", src.read("trace.json"))
        zf.writestr("tensors.safetensors", os.urandom(3 << 20))  # incompressible: only the size limit can refuse it
    monkeypatch.setenv("QDEBUG_MAX_MEMBER_BYTES", str(1 << 20))
    with pytest.raises(TraceFormatError, match=r"would expand to 3\.0 MiB \(expected at most 1\.0 MiB; raise QDEBUG_MAX_MEMBER_BYTES"):
        load_trace(path)


def test_qdr_with_a_bomb_trace_member_is_refused(tmp_path):
    path = tmp_path / "bomb.qdr"
    with zipfile.ZipFile(DATA / "burst.qdr") as src, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for info in src.infolist():
            if info.filename != "traces/replayed/0.qdt":
                zf.writestr(info.filename, src.read(info.filename))
        with zf.open("traces/replayed/0.qdt", "w", force_zip64=True) as f:
            for _ in range(16):
                f.write(bytes(16 << 20))
    with pytest.raises(TraceFormatError, match=r"traces/replayed/0\.qdt expands"):
        load_report(path)
    proc = qdebug("repl", "--trace", path)  # not a .qdt; the loader still refuses it in one line
    assert proc.returncode != 0 and "Traceback" not in proc.stderr


def test_member_larger_than_its_header_says_is_corrupt(tmp_path):
    path = tmp_path / "lying.qdt"
    with zipfile.ZipFile(DATA / "red_circle.qdt") as src, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("trace.json", src.read("trace.json"))
        zf.writestr("tensors.safetensors", src.read("tensors.safetensors"))
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("tensors.safetensors")
    real = info.file_size.to_bytes(4, "little")
    lie = (info.file_size // 2).to_bytes(4, "little")
    # Rewrite the uncompressed size (local header and central directory) to half: the reader must stop there.
    assert raw.count(real) >= 2
    raw = raw.replace(real, lie)
    path.write_bytes(bytes(raw))
    with pytest.raises(TraceFormatError):
        load_trace(path)
