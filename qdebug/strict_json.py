"""JSON that every parser reads: a NaN or infinity (which Python's json writes as bare `NaN`) becomes null."""

from __future__ import annotations

import json
import math


def finite(value):
    """`value` with every non-finite float, at any depth of dicts, lists and tuples, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value, **kwargs) -> str:
    """json.dumps of `finite(value)`, refusing anything still not JSON (allow_nan=False)."""
    try:  # most documents hold no NaN: encoded as they are (the same text), without the walk that copies them
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(finite(value), allow_nan=False, **kwargs)
