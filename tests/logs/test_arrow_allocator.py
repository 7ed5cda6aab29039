"""qdebug chooses Arrow's allocator (the system's malloc: mimalloc kept tens of MiB of a log index build) when it is
imported before pyarrow, as the `qdebug` command is, and leaves a user's own choice alone."""

from __future__ import annotations

import os
import subprocess
import sys

_PROBE = "import qdebug, pyarrow; print(pyarrow.default_memory_pool().backend_name)"


def _backend(**env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
    return subprocess.run([sys.executable, "-c", _PROBE], env=environ, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_importing_qdebug_first_gives_arrow_the_system_allocator():
    assert _backend() == "system"


def test_the_users_own_choice_of_arrow_allocator_stands():
    assert _backend(ARROW_DEFAULT_MEMORY_POOL="mimalloc") == "mimalloc"
