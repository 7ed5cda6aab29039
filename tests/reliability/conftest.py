"""Helpers for the hostile-input tests: run the installed command and check the one-line error contract."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def qdebug(*args: str, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    """Run the installed `qdebug` command (this tree, through PYTHONPATH) and capture its output."""
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Assert a non-zero exit with exactly one `qdebug: error:` line and no traceback; returns the line."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("qdebug: error: ")]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


@pytest.fixture(autouse=True)
def _this_tree(monkeypatch, tmp_path):
    """The `qdebug` subprocess runs this checkout's code (its editable install may point at another copy), with a
    log-index cache of its own."""
    from pathlib import Path

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def red_png():
    """A shipped sample image (a red circle, top left)."""
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "sample_data" / "red_circle_top_left.png"
