"""Atomic file output: write a temporary sibling, then rename it into place, so nothing half-written is left."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it replaces `path` (with normal file permissions),
    on any error it is removed and `path` is left as it was. A target that exists and is not a regular file
    (a device or pipe) is written in place."""
    target = Path(path)
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        # /dev/null, a FIFO, /dev/stdout: write into it; renaming over it would replace the device node.
        yield target
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; an output file should look like any other
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
