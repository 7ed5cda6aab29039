"""scripts/lowest-env over the python a user runs the suite with, whatever made it: a virtual environment's python sees
its own packages there (README command 2 run inside a venv), a plain interpreter its own (what .ci/run's environment is,
tested by test_lowest_transformers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "lowest-env"


def _venv(where: Path) -> Path:
    """A new virtual environment without the base interpreter's packages, holding a module and a .pth of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    py = where / "bin" / "python"
    purelib = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "qdebug_venv_marker.py").write_text("WHERE = 'the user venv'\n")
    extra = where / "extra"
    extra.mkdir()
    (extra / "qdebug_pth_marker.py").write_text("WHERE = 'a .pth of the user venv'\n")
    (purelib / "qdebug_marker.pth").write_text(f"{extra}\n")
    return py


def _stamp(base: Path | str, cache: Path) -> str:
    env = {**os.environ, "QDEBUG_BASE_PYTHON": str(base), "QDEBUG_CACHE_DIR": str(cache)}
    return subprocess.run(["bash", str(SCRIPT), "--stamp"], capture_output=True, text=True, check=True, env=env).stdout.strip()


def test_built_from_a_venv_it_sees_that_venvs_packages_not_the_base_interpreters(tmp_path):
    user = _venv(tmp_path / "user-venv")
    cache, target = tmp_path / "cache", tmp_path / "lowest"
    env = {**os.environ, "QDEBUG_BASE_PYTHON": str(user), "QDEBUG_CACHE_DIR": str(cache)}
    done = subprocess.run(["bash", str(SCRIPT), str(target)], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str(target / "bin" / "python")
    probe = ("import importlib.util as u, transformers, tokenizers, huggingface_hub, qdebug_venv_marker, qdebug_pth_marker; "
             "print(transformers.__version__, tokenizers.__version__, huggingface_hub.__version__); "
             "print(qdebug_venv_marker.WHERE, '|', qdebug_pth_marker.WHERE); "
             "print(u.find_spec('torch') is None)")
    # torch is in the interpreter the suite runs on (qdebug needs it), not in the user's new venv: nor may it be here
    seen = subprocess.run([str(target / "bin" / "python"), "-c", probe], capture_output=True, text=True, cwd="/", timeout=120)
    assert seen.returncode == 0, seen.stderr[-2000:]
    versions, markers, hidden = seen.stdout.splitlines()
    assert versions == "5.16.1 0.23.1 1.5.0"  # its own pins over what the user's environment has
    assert markers == "the user venv | a .pth of the user venv"
    assert hidden == "True"
    # What it made is its own; a second run reuses it
    again = subprocess.run(["bash", str(SCRIPT), str(target)], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0 and "reusing" in again.stderr, again.stderr[-2000:]


def test_two_environments_over_one_interpreter_get_their_own_builds(tmp_path):
    user = _venv(tmp_path / "user-venv")
    assert _stamp(user, tmp_path) != _stamp(sys.executable, tmp_path)
