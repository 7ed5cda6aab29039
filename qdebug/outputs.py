"""OutputPlan: check every output path of a run before any work, then commit all outputs together (or none)."""

from __future__ import annotations

import contextvars
import os
import stat
import tempfile
from pathlib import Path

from qdebug.atomic import ACTIVE_PLAN, write_failed
from qdebug.errors import OutputError


def check_output_path(option: str, path: str | os.PathLike) -> Path:
    """OutputError unless `path` can be written: not a folder, its folder exists or can be made, writable."""
    p = Path(path)
    where = f"{option} {p}"
    try:
        if p.is_dir():
            raise OutputError(f"{where}: is a directory (expected a file path)")
        if p.exists() and not stat.S_ISREG(p.stat().st_mode):  # a device or pipe is written in place
            if not os.access(p, os.W_OK):
                raise OutputError(f"{where}: not writable (expected a writable file path)")
            return p
        folder = p.absolute().parent
        while not folder.exists() and not folder.is_symlink():
            folder = folder.parent
        if not folder.is_dir():
            raise OutputError(f"{where}: {folder} is a file, not a folder (expected a path in an existing or creatable folder)")
        probe_folder(folder, where)
    except OSError as exc:  # a name too long, a loop of links...
        raise OutputError(f"{where}: unusable ({exc.strerror or type(exc).__name__}); expected a writable file path") from None
    return p


def check_new_folder(option: str, path: str | os.PathLike) -> Path:
    """The folder `path` names (links followed) when it can become a new output folder: missing or empty, with a
    writable folder above it; else OutputError naming the option, checked before any work."""
    where = f"{option} {path}"
    target = Path(os.path.realpath(path))  # a symlink to a folder: the folder it names (a rename over the link would fail)
    try:
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise OutputError(f"{where}: exists and is not an empty directory; expected a new or empty directory")
        check_creatable(target, where)
    except OSError as exc:  # a name too long, a loop of links, a folder that cannot be listed...
        raise OutputError(f"{where}: unusable ({exc.strerror or type(exc).__name__}); expected a new or empty directory") from None
    return target


class OutputPlan:
    """The files one command run will write, by option name (`--json`, `--png`, ...).

    `check()` validates them all before the model loads. Used as a context manager, every planned file
    written through `qdebug.atomic` stays a temporary in its target folder until the block ends without an
    error; then all are renamed into place together. On any error (or Ctrl-C) the temporaries are removed and
    earlier files at those paths are left untouched.
    """

    def __init__(self, outputs: dict[str, str | os.PathLike | None]):
        self.outputs = {opt: Path(p) for opt, p in outputs.items() if p is not None and str(p) != "-"}
        self._pending: list[tuple[Path, Path]] = []
        self._token: contextvars.Token | None = None

    def check(self) -> "OutputPlan":
        """Check every output path now (OutputError naming the option and path); two options may not share a file."""
        seen: dict[object, str] = {}
        for option, path in self.outputs.items():
            check_output_path(option, path)
            if not stat_regular_or_missing(path):
                continue  # /dev/null or a pipe: several outputs may share it
            for key in file_keys(path):
                if key in seen:
                    raise OutputError(f"{option} {path}: also given to {seen[key]}, the same file (expected a different file for each output)")
            for key in file_keys(path):
                seen[key] = option
        return self

    def owns(self, target: Path) -> bool:
        """Whether `target` is one of the planned outputs (internal temporaries are not)."""
        key = resolved(target)
        return any(resolved(p) == key for p in self.outputs.values())

    def defer(self, tmp: Path, target: Path) -> None:
        """Keep a finished temporary until commit."""
        self._pending.append((tmp, target))

    def __enter__(self) -> "OutputPlan":
        self._token = ACTIVE_PLAN.set(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._token is not None:
            ACTIVE_PLAN.reset(self._token)
        if exc_type is not None:
            self.discard()
            return
        self.commit()

    def commit(self) -> None:
        """Rename every finished temporary into place (all were checked and written before the first rename)."""
        pending, self._pending = self._pending, []
        for i, (tmp, target) in enumerate(pending):
            try:
                os.replace(tmp, target)
            except OSError as exc:
                for rest, _ in pending[i:]:
                    rest.unlink(missing_ok=True)
                raise write_failed(target, exc) from None

    def discard(self) -> None:
        """Remove every temporary; the targets keep what they held before the run."""
        for tmp, _ in self._pending:
            tmp.unlink(missing_ok=True)
        self._pending = []


def check_creatable(target: Path, where: str) -> None:
    """OutputError unless the nearest existing folder above `target` is a writable folder (so it can be made there)."""
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{where}: {parent} is a file, not a folder (expected a path in an existing or creatable folder)")
    probe_folder(parent, where)


def probe_folder(folder: Path, where: str) -> None:
    """OutputError unless an entry can really be made in `folder`: os.access says yes to root everywhere, and
    /proc, /sys or a read-only mount refuse only the attempt, so a folder is made there and removed at once."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: folder {folder} is not writable (expected a writable folder)")
    try:
        os.rmdir(tempfile.mkdtemp(dir=folder, prefix=".qdebug-probe-"))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise OutputError(f"{where}: nothing can be created in {folder} ({reason}); expected a writable folder") from None


def resolved(path: Path) -> Path:
    """The file a path names once `..` and symlinks are followed (`sub/../a.json` and `a.json` are one file)."""
    return Path(os.path.realpath(path))


def file_keys(path: Path) -> list:
    """What identifies the file `path` names: its resolved path, and (device, inode) when it exists (hard links)."""
    keys: list = [resolved(path)]
    try:
        st = os.stat(path)
        keys.append((st.st_dev, st.st_ino))
    except OSError:
        pass
    return keys


def stat_regular_or_missing(path: Path) -> bool:
    """True for a regular file or a path that does not exist yet (two outputs there would clobber each other)."""
    try:
        return not path.exists() or stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True
