"""The log scan's native pass is optional at install: without a working C compiler qdebug still builds (and logs are
recognised by the RE2 passes, which the scan tests hold to the same reference); with one, the pass is there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_machine_without_a_c_compiler_still_builds_qdebug(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "qdebug", src / "qdebug", ignore=shutil.ignore_patterns("__pycache__", "*.so", "checkpoint"))
    env = {**os.environ, "CC": "/bin/false"}  # every compile fails, as on a host with no compiler
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("qdebug-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "qdebug/replay/formats/log_columns.py" in names
    assert not [n for n in names if "_logscan" in n and not n.endswith(".c")], names


def test_this_install_has_the_native_pass():
    """`pip install -e .` on this machine (the README's set-up) compiled it: the figures in the notes are its."""
    from qdebug.replay.formats import log_columns

    assert log_columns.native_built(), "the native pass is not built: run `pip install -e .` where a C compiler is"
