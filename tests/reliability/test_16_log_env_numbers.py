"""Issue 35 item 16: a QDEBUG_* number that is not one (`QDEBUG_MAX_MEMBER_BYTES=²`, any non-integer) is a one-line
error naming the variable and what is expected, exit 2, never a traceback (both are read through qdebug/env.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import one_line_error, qdebug

TRACE = Path(__file__).resolve().parents[2] / "tests" / "data" / "red_circle.qdt"


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
