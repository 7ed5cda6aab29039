"""Build (or reopen) a runtime log's index: scan, aggregate per-request verdict inputs as we go, store on disk.

Memory holds only the requests still open (between their first mention and their first token, capped);
every event, closed request and candidate overwrite goes straight to the SQLite index.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from qdebug.replay.formats.log_scan import KIND_CODE, ScanStats, log_paths, order_files, scan_files
from qdebug.replay.log_index import CODE_OF_VERDICT, LogIndex, cache_dir, cache_key
from qdebug.vocab import EventKind, Verdict

# Open requests kept in memory at most; beyond it the oldest half is written out (a later mention merges).
MAX_OPEN = 50_000
_OVER, _WRITE, _SYNC, _DESYNC, _FIRST = (KIND_CODE[k] for k in (EventKind.BUFFER_OVERWRITE, EventKind.BUFFER_WRITE, EventKind.SYNC, EventKind.DESYNC, EventKind.FIRST_TOKEN))
_ERRORS = {KIND_CODE[EventKind.SHAPE_MISMATCH], KIND_CODE[EventKind.INDEX_OUT_OF_BOUNDS]}
_FINDING_KINDS = _ERRORS | {_DESYNC}
_ERROR_CODE, _DESYNC_CODE = CODE_OF_VERDICT[Verdict.ERROR], CODE_OF_VERDICT[Verdict.DESYNC]


class _Aggregator:
    """Per-request state while a request is open: first mention, severity, last desync/write offsets, last sync."""

    def __init__(self, index: LogIndex):
        self.index = index
        self.open: dict[str, list] = {}
        self.next_ord = 0
        self.closed: list[tuple] = []

    def _state(self, rid: str, line: int) -> list:
        s = self.open.get(rid)
        if s is None:
            # [ord, line, rank, has_d, d_text, d_vis, has_w, w_vis, last_stitch]
            s = self.open[rid] = [self.next_ord, line, 0, 0, None, None, 0, None, None]
            self.next_ord += 1
            if len(self.open) > MAX_OPEN:
                self._evict(len(self.open) // 2)
        return s

    def _evict(self, n: int) -> None:
        """Write out the n oldest open requests (closing and evicting write the same row)."""
        for rid in list(self.open)[:n]:
            self._close(rid)

    def feed(self, rows: list) -> None:
        """Take one chunk of event rows: store them, update open requests, note findings and overwrites."""
        self.index.add_events(rows)
        overwrites, findings = [], []
        state, opened = self._state, self.open
        for seq, line, _t, kind, rid, donor, offset, text_offset, _tokens, _msg in rows:
            if kind == _OVER:
                d = state(donor, line)
                state(rid, line)
                d[6], d[7] = 1, offset  # the overwrite is the donor's own write
                if donor != rid:
                    overwrites.append((seq, rid, donor))
                continue
            if kind in _FINDING_KINDS:
                findings.append(seq)
            if rid is None:
                continue
            s = opened.get(rid) or state(rid, line)
            if kind == _WRITE:
                s[6], s[7] = 1, offset
            elif kind == _SYNC:
                s[8] = seq
            elif kind == _DESYNC:
                s[3], s[4], s[5] = 1, text_offset, offset
                s[2] = max(s[2], _DESYNC_CODE)
            elif kind in _ERRORS:
                s[2] = max(s[2], _ERROR_CODE)
            elif kind == _FIRST:
                self._close(rid)
        if overwrites:
            self.index.add_overwrites(overwrites)
        if findings:
            self.index.add_findings(findings)
        if self.closed:
            self.index.add_requests(self.closed)
            self.closed = []

    def _close(self, rid: str) -> None:
        o, line, rank, has_d, d_text, d_vis, has_w, w_vis, last = self.open.pop(rid)
        self.closed.append((o, rid, line, rank, has_d, d_text, d_vis, has_w, w_vis, last))

    def flush(self) -> None:
        """Write every request still open."""
        for rid in list(self.open):
            self._close(rid)
        self.index.add_requests(self.closed)
        self.closed = []


def build_index(paths: list[Path], target: Path, progress: Callable[[int, int, int], None] | None = None) -> tuple[LogIndex, bool]:
    """Scan the files (in time order) into a new index at target; (index, interrupted by Ctrl-C)."""
    index = LogIndex.create(target)
    agg = _Aggregator(index)
    stats = ScanStats()
    interrupted = False
    t0 = time.perf_counter()
    try:
        scan_files(paths, agg.feed, progress, stats)
    except KeyboardInterrupt:
        interrupted = True
    agg.flush()
    index.finish({
        "complete": not interrupted, "sources": [str(p) for p in paths], "files": stats.files,
        "total_lines": stats.total_lines, "unknown_lines": stats.unknown_lines, "events": stats.events,
        "bytes_read": stats.bytes_read, "bytes_total": stats.bytes_total, "changes": stats.changes,
        "build_seconds": round(time.perf_counter() - t0, 3),
    })
    return index, interrupted


def open_log_index(
    sources: list[str | os.PathLike], progress: Callable[[int, int, int], None] | None = None, use_cache: bool = True,
) -> tuple[LogIndex, bool, bool]:
    """The index of one or more runtime logs: (index, reused from the cache, interrupted while building).

    Files are read in time order (rotated `svc.log.2.gz svc.log.1.gz svc.log` in any order on the command line).
    An interrupted build is kept only for this run; a finished one is cached under the files' key.
    """
    paths = order_files(log_paths(list(sources)))
    key = cache_key(paths)
    folder = cache_dir()
    cached = folder / f"{key}.sqlite"
    if use_cache:
        found = LogIndex.open(cached)
        if found is not None:
            return found, True, False
        if cached.is_symlink() or (cached.exists() and not cached.is_file()):
            use_cache = False  # a folder or link there is not ours to replace: build for this run only
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".building", dir=folder)
    except OSError:  # no writable cache: build in a private temp folder, used for this run only
        fd, tmp = tempfile.mkstemp(prefix="qdebug-log-", suffix=".sqlite")
        use_cache = False
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        index, interrupted = build_index(paths, tmp_path, progress)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    if use_cache and not interrupted:
        index.close()
        try:
            os.replace(tmp_path, cached)
        except OSError:  # the cache entry cannot be replaced (permissions, a race with another run): use this build
            use_cache = False
        else:
            reopened = LogIndex.open(cached)
            if reopened is not None:
                return reopened, False, False
            tmp_path = cached
    index.close()
    index = LogIndex.open(tmp_path) or _open_partial(tmp_path)
    if not use_cache or interrupted:
        _unlink_at_exit(tmp_path)
    return index, False, interrupted


def _open_partial(path: Path) -> LogIndex:
    """An interrupted (incomplete) index, opened for this run's report only."""
    import json
    import sqlite3

    conn = sqlite3.connect(path, check_same_thread=False)
    index = LogIndex(path, conn)
    index.meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    return index


def _unlink_at_exit(path: Path) -> None:
    import atexit

    atexit.register(path.unlink, missing_ok=True)
