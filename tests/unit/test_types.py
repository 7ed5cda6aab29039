"""The type checker passes: `python -m mypy` with pyproject.toml's [tool.mypy] (the whole package: the top-level modules
and every layer, tui included, bodies checked; the fully annotated modules kept fully annotated) reports no error."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_reports_no_error():
    # The cache (.mypy_cache, ignored by git) keeps a rerun to seconds; a first run reads torch's and transformers'
    # annotations (about a minute).
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, f"mypy found errors:\n{run.stdout}{run.stderr}"


def test_mypy_checks_the_layers_the_ci_promises():
    """The configuration still names the vocabulary, model, trace, engine, analysis, export, demo, replay, render,
    commands and serve layers and checks function bodies."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert {"qdebug/*.py", "qdebug/model", "qdebug/trace", "qdebug/engine", "qdebug/analysis", "qdebug/export", "qdebug/demo",
            "qdebug/replay", "qdebug/render", "qdebug/commands", "qdebug/serve"} <= set(mypy["files"])
    assert mypy["check_untyped_defs"] is True
    strict = [o for o in mypy["overrides"] if o.get("disallow_untyped_defs")]
    assert any("qdebug.vocab" in o["module"] for o in strict)


def test_mypy_covers_every_package_of_qdebug():
    """Every subpackage of qdebug (the TUI too) is a checked path, and none is only read for the types it exports."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    packages = {f"qdebug/{p.parent.name}" for p in (ROOT / "qdebug").glob("*/__init__.py")}
    assert "qdebug/tui" in packages
    assert packages - set(mypy["files"]) == set()
    silent = [m for o in mypy["overrides"] if o.get("follow_imports") in ("silent", "skip") for m in o["module"]]
    assert [m for m in silent if m.startswith("qdebug")] == []


def test_no_module_of_the_checked_layers_has_its_errors_hidden():
    """Every module under the checked layers is held to the checker: no `ignore_errors` override hides one."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    hidden = [m for o in mypy["overrides"] if o.get("ignore_errors") for m in o["module"]]
    assert hidden == []
