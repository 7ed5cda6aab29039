"""Run the installed `qdebug` as a user's shell would, with both streams redirected to files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def qdebug(tmp: Path, *args) -> tuple[int, str, str]:
    """`qdebug ARGS` with stdout and stderr to files (neither is a terminal), its own log cache; (exit code, stdout, stderr)."""
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    with open(out, "w") as o, open(err, "w") as e:
        code = subprocess.run(["qdebug", *map(str, args)], stdout=o, stderr=e, timeout=400,
                              env={**os.environ, "QDEBUG_CACHE_DIR": str(tmp / "cache")}).returncode
    return code, out.read_text(), err.read_text()
