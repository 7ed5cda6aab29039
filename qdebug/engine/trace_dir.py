"""The folder an engine writes its traces to: one `.qdt` per traced request, named by the client's id, and
`index.jsonl` naming each (the same shape as `qdebug serve --traces`)."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from qdebug.atomic import link_new

INDEX = "index.jsonl"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_stem(hint: str) -> str:
    """A file stem from a client's id or the server's request id: letters, digits, `._-`, at most 100 chars."""
    stem = _SAFE.sub("_", hint).strip("._")[:100]
    return stem or "request"


class TraceDir:
    """Writes traces into one folder without ever replacing a file: a name already there gets `-2`, `-3`, ..."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, trace, hint: str, line: dict) -> Path:
        """Save `trace` as `<hint>.qdt` (or the next free name) and append `line` (plus its file name) to the index.

        The trace is written whole to a hidden temporary first, then hard-linked under the first free name (a link
        never replaces a file, even one another process made a moment ago), so a reader never sees a partial .qdt.
        """
        import uuid

        from qdebug.trace.schema import save_trace

        tmp = self.root / f".qdebug-{uuid.uuid4().hex}.qdt.tmp"  # a new name: the trace gets ordinary file permissions
        try:
            save_trace(trace, tmp)
            path = self._link_free(tmp, safe_stem(hint))
        finally:
            Path(tmp).unlink(missing_ok=True)
        with self._lock, open(self.root / INDEX, "a", encoding="utf-8") as f:
            f.write(json.dumps({**line, "trace": path.name}) + "\n")
        return path

    def _link_free(self, tmp: str, stem: str) -> Path:
        for n in range(1, 100_000):
            path = self.root / (f"{stem}.qdt" if n == 1 else f"{stem}-{n}.qdt")
            try:
                link_new(tmp, path)
                return path
            except FileExistsError:
                continue
        raise OSError(f"no free trace name for {stem} in {self.root}")


def find_in_index(root: str | os.PathLike, key: str, value: str) -> dict | None:
    """The last index line whose `key` equals `value` (None when the index has none yet); bad lines are skipped."""
    path = Path(root) / INDEX
    if not path.is_file():
        return None
    found = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(line, dict) and line.get(key) == value:
                found = line
    return found
