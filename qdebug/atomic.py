"""Atomic file output: write a temporary sibling, then rename it into place, so nothing half-written is left.

Inside an active `qdebug.outputs.OutputPlan` the rename of a planned target is deferred to the plan's commit,
so every output of one run lands together (or none does).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from qdebug.errors import OutputError

# The OutputPlan collecting this run's outputs (None: rename each file as soon as it is written).
ACTIVE_PLAN: ContextVar = ContextVar("qdebug_output_plan", default=None)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    """The permission bits the output gets: those of the file it replaces, else the usual ones (0666 & ~umask)."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)  # a private (0600) or executable file stays so when rewritten
    except OSError:
        return 0o666 & ~_umask()


def write_failed(target: Path, exc: OSError) -> OutputError:
    """One-line error for a write that failed (disk full, permission, a folder in the way...)."""
    why = exc.strerror or type(exc).__name__
    return OutputError(f"cannot write {target}: {why} (expected a writable file path)")


def temp_stem(target: Path, extra: int) -> str:
    """`target`'s name, cut so that it plus `extra` bytes of temporary-name decoration fits the folder's name limit
    (a 250-byte name is a legal output; its temporary sibling must be too)."""
    try:
        limit = os.pathconf(target.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    raw = target.name.encode("utf-8", "surrogateescape")
    return raw[: max(1, limit - extra)].decode("utf-8", "ignore") or "out"


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `path`; on success it replaces `path` (keeping its permission bits),
    on any error it is removed and `path` is left as it was. A target that exists and is not a regular file
    (a device or pipe) is written in place. OSError while writing becomes OutputError (one line)."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"cannot write {target}: it is a directory (expected a file path)")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        # /dev/null, a FIFO, /dev/stdout: write into it; renaming over it would replace the device node.
        try:
            yield target
        except OSError as exc:
            raise write_failed(target, exc) from None
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{temp_stem(target, 14)}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise write_failed(target, exc) from None
    plan = ACTIVE_PLAN.get()
    try:
        yield Path(tmp)
        os.chmod(tmp, _mode_for(target))  # mkstemp makes 0600: a new file gets the usual mode, a rewrite keeps its own
        if plan is not None and plan.owns(target):
            plan.defer(Path(tmp), target)  # renamed with the run's other outputs at the plan's commit
        else:
            os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise write_failed(target, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def link_new(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the finished file `tmp` at `target` unless `target` exists (FileExistsError): a hard link, which never
    replaces a file, or a claimed name on a file system without hard links. `tmp` is left for the caller to remove."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError:
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))  # FileExistsError when taken
        os.replace(tmp, target)
