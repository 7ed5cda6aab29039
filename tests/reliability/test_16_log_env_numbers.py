"""Issue 35 item 16: a QDEBUG_* number that is not one (`QDEBUG_MAX_MEMBER_BYTES=²`, any non-integer) is a one-line
error naming the variable and what is expected, exit 2, never a traceback; every such variable is read through one
helper (qdebug/env.py), so they all behave alike."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import one_line_error, qdebug

TRACE = Path(__file__).resolve().parents[2] / "tests" / "data" / "red_circle.qdt"
PACKAGE = Path(__file__).resolve().parents[2] / "qdebug"


@pytest.mark.parametrize("name", ["QDEBUG_MAX_MEMBER_BYTES", "QDEBUG_MAX_ARCHIVE_BYTES"])
@pytest.mark.parametrize("value", ["²", "1e9", "12MB", "-5", "0", "٣"])
def test_a_bad_number_in_a_qdebug_variable_is_one_line(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    proc = qdebug("diff", TRACE, TRACE, timeout=300)
    line = one_line_error(proc, name, repr(value), "whole number")
    assert proc.returncode == 2
    assert "expected e.g." in line


def test_a_good_number_is_taken(monkeypatch):
    monkeypatch.setenv("QDEBUG_MAX_MEMBER_BYTES", " 2000000000 ")
    assert qdebug("diff", TRACE, TRACE, timeout=300).returncode == 0
    monkeypatch.setenv("QDEBUG_MAX_MEMBER_BYTES", "1000")  # too small for the trace's members: refused by name
    proc = qdebug("diff", TRACE, TRACE, timeout=300)
    one_line_error(proc)
    assert proc.returncode == 2


def test_no_module_parses_a_qdebug_number_itself():
    """int()/float() of os.environ outside qdebug/env.py would bring the traceback back (the vLLM plugin's
    QDEBUG_VLLM_SEED, read inside the server, is its own module's: listed here until it moves to env_int)."""
    allowed = {PACKAGE / "env.py", PACKAGE / "engine" / "vllm_faults.py"}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("int", "float"):
                if "environ" in ast.unparse(node) or "getenv" in ast.unparse(node):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []
