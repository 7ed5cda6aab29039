"""The folder an engine writes its traces to: one `.qdt` per traced request, named by the client's id, and
`index.jsonl` naming each (the same shape as `qdebug serve --traces`).

Only files of the folder itself are read or written: `index.jsonl` is opened without following a symbolic link and
must be a regular file with one name (a link or hard link to a file elsewhere is refused), and a trace an index
line names must be a `NAME.qdt` whose real path is in the folder. An index line is appended whole or not at all,
and a reader skips a torn line (left by a crash) and still finds the entries after it.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from qdebug.atomic import link_new

INDEX = "index.jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
TRACE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*\.qdt")  # what the writer names a trace (never hidden, no path)
_RECOVER_TRIES = 64  # starts of an object tried inside one unreadable line


def safe_stem(hint: str) -> str:
    """A file stem from a client's id or the server's request id: letters, digits, `._-`, at most 100 chars (made
    from the id's first 1,000 characters: a client's megabyte id costs the engine's step nothing more)."""
    stem = _SAFE.sub("_", hint[:1000]).strip("._")[:100]
    return stem or "request"


class TraceDir:
    """Writes traces into one folder without ever replacing a file: a name already there gets `-2`, `-3`, ..."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def check_writable(self, where: str) -> None:
        """OutputError (one line, naming `where`) unless an entry can really be made in the folder: a read-only
        folder or mount must be said once, at start, not at every request."""
        from qdebug.outputs import probe_folder

        probe_folder(self.root, where)

    def write(self, trace, hint: str, line: dict, limit: int | None = None) -> Path:
        """Save `trace` as `<hint>.qdt` (or the next free name) and append `line` (plus its file name) to the index.

        The trace is written whole to a hidden temporary first, then hard-linked under the first free name (a link
        never replaces a file, even one another process made a moment ago), so a reader never sees a partial .qdt.
        With `limit` (bytes: the watch's flight recorder), a trace that would take the folder's traces and index past
        it is not kept (TraceBoundError): the bound holds after every write, not only before a recording.
        """
        import uuid

        from qdebug.trace.schema import save_trace

        tmp = self.root / f".qdebug-{uuid.uuid4().hex}.qdt.tmp"  # a new name: the trace gets ordinary file permissions
        try:
            save_trace(trace, tmp, store_tensors=True, compact=True)  # deflating float rows costs the engine's CPU for ~10%
            if limit is not None:
                adds = tmp.stat().st_size + len(json.dumps({**line, "trace": f"{safe_stem(hint)}-00000.qdt"})) + 2
                if trace_bytes(self.root) + adds > limit:
                    raise TraceBoundError(f"{self.root} would hold more than {limit >> 20} MiB of traces with this one "
                                          f"({adds:,} bytes); not kept")
            path = self._link_free(tmp, safe_stem(hint))
        finally:
            Path(tmp).unlink(missing_ok=True)
        append_index_line(self.root, {**line, "trace": path.name}, self._lock)
        return path

    def _link_free(self, tmp: Path, stem: str) -> Path:
        for n in range(1, 100_000):
            path = self.root / (f"{stem}.qdt" if n == 1 else f"{stem}-{n}.qdt")
            try:
                link_new(tmp, path)
                return path
            except FileExistsError:
                continue
        raise OSError(f"no free trace name for {stem} in {self.root}")


class TraceBoundError(OSError):
    """A trace not kept: the folder's bound would be passed."""


def trace_bytes(root: str | os.PathLike) -> int:
    """Bytes the folder's traces and index take (regular files of the folder; 0 when it cannot be read)."""
    total = 0
    try:
        with os.scandir(os.fspath(root)) as entries:
            for entry in entries:
                if entry.name.endswith(".qdt") or entry.name == INDEX:
                    st = entry.stat(follow_symlinks=False)
                    total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    except OSError:
        return 0
    return total


def open_index(root: str | os.PathLike, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the folder's own `index.jsonl` (FileNotFoundError when there is none yet); OSError when it is a
    symbolic link, not a regular file, or a hard link (more than one name: it may be a file outside the folder)."""
    return open_own(root, INDEX, flags)


def open_own(root: str | os.PathLike, name: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the folder's own file `name` (the index, the batch log), refused as `open_index` says."""
    path = os.path.join(root, name)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{path} is a symbolic link; it must be a file of the folder itself") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else f"a file with {st.st_nlink} names (a hard link)"
        raise OSError(errno.EPERM, f"{path} is {what}; it must be a file of the folder itself")
    os.set_blocking(fd, True)
    return fd


def append_index_line(root: str | os.PathLike, line: dict, lock: threading.Lock | None = None) -> None:
    """Append one line to the folder's index, whole or not at all: one write; a short or failed write (a full disk)
    is cut back off, so the next line never lands glued to half of this one. After a torn last line (a crash) the
    new line starts on a line of its own."""
    data = (json.dumps(line) + "\n").encode("utf-8")
    with lock or threading.Lock():
        fd = open_index(root, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            written = 0
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes of an index line were written")
            except OSError:
                if written and os.fstat(fd).st_size == size + written:  # nobody appended since: take the part back
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def index_entries(lines: Iterable[str]) -> Iterator[dict]:
    """The entries of an index's lines; a line that is not a JSON object is skipped, and when a torn line has the
    next entry glued to it (written before appends were whole), that entry is still found."""
    decoder = json.JSONDecoder()
    for raw in lines:
        raw = raw.strip()
        if not raw:
            continue
        try:
            entry = json.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            entry = _glued_entry(decoder, raw)
        if isinstance(entry, dict):
            yield entry


def _glued_entry(decoder: json.JSONDecoder, raw: str) -> dict | None:
    """The object that ends a torn line: the first `{"` from which the rest of the line is one JSON object."""
    start = 0
    for _ in range(_RECOVER_TRIES):
        start = raw.find('{"', start + 1)
        if start < 0:
            return None
        try:
            entry, end = decoder.raw_decode(raw, start)
        except (json.JSONDecodeError, RecursionError):
            continue
        if end == len(raw) and isinstance(entry, dict):
            return entry
    return None


def read_index(root: str | os.PathLike) -> Iterator[dict]:
    """The entries of the folder's own index (none when it has none yet or it is not a file of the folder)."""
    try:
        fd = open_index(root)
    except OSError:
        return
    with open(fd, encoding="utf-8", errors="replace", closefd=True) as f:
        yield from index_entries(f)


def find_in_index(root: str | os.PathLike, key: str, value: str) -> dict | None:
    """The last index line whose `key` equals `value` (None when the index has none yet); bad lines are skipped."""
    found = None
    for line in read_index(root):
        if line.get(key) == value:
            found = line
    return found


def trace_in_folder(root: str | os.PathLike, name: object, one_name: bool = False) -> str | None:
    """The path of trace `name` when it is a `NAME.qdt` regular file whose real path is in folder `root` itself
    (not `../x.qdt`, `/etc/passwd`, a hidden file, nor a link to a file elsewhere); None otherwise. `one_name`
    (what the server's route serves): a hard link, which may be a file elsewhere, is refused too."""
    if not isinstance(name, str) or not TRACE_NAME.fullmatch(name):
        return None
    folder = os.path.realpath(root)
    path = os.path.realpath(os.path.join(folder, name))
    try:
        st = os.stat(path)
    except OSError:
        return None
    if os.path.dirname(path) != folder or not stat.S_ISREG(st.st_mode) or (one_name and st.st_nlink != 1):
        return None
    return path
