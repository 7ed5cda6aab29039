"""What kind of file an input path names, so a pipe or device is refused before anything opens it (which could block)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: str | os.PathLike) -> str | None:
    """None for a regular file (links followed) or a path that cannot be stat'ed, else what it is ("a FIFO (named pipe)", ...)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None  # missing or unreadable: the caller's own open names that
    if stat.S_ISREG(mode):
        return None
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def refuse_special(path, what: str, expected: str, error: type, *, allow_fifo: bool = False) -> None:
    """Raise `error` ("{what} {path} is a character device, not a regular file (expected …)") for a device, socket or
    (unless `allow_fifo`: a log may be streamed through a pipe) FIFO; directories and missing paths are the caller's."""
    kind = file_kind(path)
    if kind is None or kind == "a directory" or (allow_fifo and kind.startswith("a FIFO")):
        return
    raise error(f"{what} {path} is {kind}, not a regular file (expected {expected})")


def require_file(path: str | os.PathLike, noun: str, formats: str, error: type) -> None:
    """Raise `error` unless `path` is an existing regular file: "{noun} not found: …", "{noun} path is a directory: …"
    or "{noun} path is a FIFO …, not a regular file: …" (opening a FIFO or device would block or read forever)."""
    if not os.path.exists(path):
        raise error(f"{noun} not found: {path} (expected an existing {formats} file)")
    if os.path.isdir(path):
        raise error(f"{noun} path is a directory: {path} (expected an {noun} file)")
    kind = file_kind(path)
    if kind:
        raise error(f"{noun} path is {kind}, not a regular file: {path} (expected an {noun} file)")


def require_streamable(path: str | os.PathLike, noun: str, expected: str, error: type, shown: str | None = None) -> Path:
    """`path` when it is an existing file or a pipe (a log may be streamed); else `error`: "{noun} not found: …",
    "{noun} is a directory: …" or "{noun} … is a character device, …", each naming `expected`."""
    p = Path(path)
    shown = shown or str(p)
    if not p.exists():
        raise error(f"{noun} not found: {shown} (expected {expected})")
    if p.is_dir():
        raise error(f"{noun} is a directory: {shown} (expected {expected})")
    refuse_special(p, noun, expected, error, allow_fifo=True)
    return p
