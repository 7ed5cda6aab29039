"""Whole numbers read from QDEBUG_* environment variables: every one checked the same way, a bad value a one-line error."""

from __future__ import annotations

import os
import re

from qdebug.errors import InputError

_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: int() would take "²"'s cousins "٣" and "1_000" too


def env_int(name: str, default: int, *, minimum: int = 1, unit: str = "") -> int:
    """The integer in environment variable `name` (unset or blank: `default`); InputError naming the variable, the
    value and what is expected when it is not a whole number of at least `minimum`."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if _DIGITS.fullmatch(text) and int(text) >= minimum:
        return int(text)
    shown = text if len(text) <= 40 else text[:40] + "..."
    what = f"a whole number{' of ' + unit if unit else ''} of at least {minimum:,}"
    raise InputError(f"{name}={shown!r}: not {what} (expected e.g. {name}={default}, or unset it for the default {default:,})")
