"""The separately built environments the suite runs in (vLLM's, the lowest transformers'): one rule for a missing one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def built_python(py: Path | None, what: str, script: str) -> Path:
    """`py`, or (when the environment is missing) a failure under CI, which builds it, and a skip elsewhere."""
    if py is None:
        if os.environ.get("CI"):
            pytest.fail(f"no {what} environment: .ci/run builds it with {script}")
        pytest.skip(f"no {what} environment here ({script} builds it)")
    return py
