"""LogIndex: a runtime log's events, requests and findings in SQLite, built once per file version (see cache_key)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from qdebug import strict_json
from qdebug.vocab import EVENT_KINDS, VERDICT_RANK, EventKind, Verdict

from .batch import Event

# Bump when the parser or the tables change: an index built by another version is rebuilt, never misread.
INDEX_VERSION = 2
# A request's stored verdict code (column `rank`): its place in vocab.VERDICT_RANK among the verdicts a log can
# give (never `diverged`), so SQL's max() and ORDER BY rank keep the shared ranking. On disk: ok 0, error 1, desync 2, contaminated 3.
VERDICT_OF_CODE = tuple(v for v in sorted(VERDICT_RANK, key=VERDICT_RANK.__getitem__) if v != Verdict.DIVERGED)
CODE_OF_VERDICT = {v: code for code, v in enumerate(VERDICT_OF_CODE)}
KIND_ALIASES = {"overwrite": EventKind.BUFFER_OVERWRITE, EventKind.DESYNC: EventKind.DESYNC, "shape": EventKind.SHAPE_MISMATCH, "oob": EventKind.INDEX_OUT_OF_BOUNDS}

# STRICT tables with CHECKs: SQLite itself refuses text where numbers belong and event kinds or verdict codes out of
# range, so an index whose tables are exactly these (checked on open, `_schema_ok`) holds only values we can read.
_STRICT = " STRICT" if sqlite3.sqlite_version_info >= (3, 37) else ""
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL){strict};
CREATE TABLE events(seq INTEGER PRIMARY KEY, line INTEGER, t REAL, kind INTEGER NOT NULL CHECK(kind BETWEEN 0 AND {kinds}),
                    rid TEXT, donor TEXT, offset INTEGER, text_offset INTEGER, tokens INTEGER, message TEXT){strict};
CREATE TABLE requests(ord INTEGER PRIMARY KEY, rid TEXT NOT NULL UNIQUE, line INTEGER,
                      rank INTEGER NOT NULL CHECK(rank BETWEEN 0 AND {ranks}),
                      has_d INTEGER, d_text INTEGER, d_vis INTEGER, has_w INTEGER, w_vis INTEGER,
                      last_stitch INTEGER, donor TEXT, donor_seq INTEGER){strict};
CREATE TABLE overwrites(seq INTEGER PRIMARY KEY, victim TEXT, donor TEXT){strict};
CREATE TABLE contam(seq INTEGER PRIMARY KEY, victim TEXT, donor TEXT){strict};
CREATE TABLE findings(seq INTEGER PRIMARY KEY){strict};
""".format(strict=_STRICT, kinds=len(EVENT_KINDS) - 1, ranks=len(VERDICT_OF_CODE) - 1)
_UPSERT = """
INSERT INTO requests(ord, rid, line, rank, has_d, d_text, d_vis, has_w, w_vis, last_stitch) VALUES (?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(rid) DO UPDATE SET
  rank = max(rank, excluded.rank),
  d_text = CASE WHEN excluded.has_d THEN excluded.d_text ELSE d_text END,
  d_vis = CASE WHEN excluded.has_d THEN excluded.d_vis ELSE d_vis END,
  has_d = max(has_d, excluded.has_d),
  w_vis = CASE WHEN excluded.has_w THEN excluded.w_vis ELSE w_vis END,
  has_w = max(has_w, excluded.has_w),
  last_stitch = coalesce(excluded.last_stitch, last_stitch)
"""
_FINALISE = """
INSERT INTO contam SELECT o.seq, o.victim, o.donor FROM overwrites o JOIN requests r ON r.rid = o.victim
  WHERE r.last_stitch IS NULL OR o.seq < r.last_stitch;
CREATE INDEX contam_victim ON contam(victim, seq);
UPDATE requests SET rank = {contaminated},
  donor_seq = (SELECT max(seq) FROM contam c WHERE c.victim = requests.rid)
  WHERE rid IN (SELECT victim FROM contam);
UPDATE requests SET donor = (SELECT donor FROM contam c WHERE c.seq = requests.donor_seq) WHERE donor_seq IS NOT NULL;
INSERT INTO findings SELECT seq FROM contam;
""".format(contaminated=CODE_OF_VERDICT[Verdict.CONTAMINATED])
_EVENT_COLS = "e.seq, e.line, e.t, e.kind, e.rid, e.donor, e.offset, e.text_offset, e.tokens, e.message"


def cache_dir() -> Path:
    """Where indexes live: $QDEBUG_CACHE_DIR, else $XDG_CACHE_HOME/qdebug/logs, else ~/.cache/qdebug/logs."""
    env = os.environ.get("QDEBUG_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qdebug" / "logs"


# Bytes hashed at each end of a log for its cache key: a file swapped in with the same size and mtime still differs.
EDGE_BYTES = 64 * 1024


def cache_key(paths: list[Path]) -> str:
    """A key for a list of log files: each one's path, size, mtime, inode, ctime and head/tail hash, and the index version.

    Size and mtime alone are kept by `cp -p`, rsync and `touch -r`; a replaced file has another inode or ctime,
    and content written in place with the old mtime set back still changes the ctime and (almost surely) the ends.
    """
    parts = []
    for p in paths:
        st = p.stat()
        parts.append([str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_ctime_ns, _edge_hash(p, st.st_size)])
    return hashlib.sha256(json.dumps([INDEX_VERSION, parts]).encode()).hexdigest()[:32]


def _edge_hash(path: Path, size: int) -> str:
    """SHA-256 of the file's first and last EDGE_BYTES ("" for what cannot be read here: the scan names the problem)."""
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""  # a pipe or device: opening it here could block
        with open(path, "rb") as f:
            digest.update(f.read(EDGE_BYTES))
            if size > EDGE_BYTES:
                f.seek(max(EDGE_BYTES, size - EDGE_BYTES))
                digest.update(f.read(EDGE_BYTES))
    except OSError:
        return ""
    return digest.hexdigest()


@dataclass
class EventFilter:
    """Which events (and findings) to show: a time window, one request's story, some kinds."""

    since: float | None = None
    until: float | None = None
    request: str | None = None
    kinds: tuple[str, ...] = ()

    def where(self, alias: str = "e") -> tuple[str, list]:
        """An SQL condition on the events table and its parameters ("1" when nothing is filtered)."""
        conds, params = [], []
        if self.since is not None:
            conds.append(f"{alias}.t >= ?")
            params.append(self.since)
        if self.until is not None:
            conds.append(f"{alias}.t <= ?")
            params.append(self.until)
        if self.request is not None:
            conds.append(f"({alias}.rid = ? OR {alias}.donor = ?)")
            params += [self.request, self.request]
        if self.kinds:
            codes = [EVENT_KINDS.index(k) for k in self.kinds]
            conds.append(f"{alias}.kind IN ({','.join('?' * len(codes))})")
            params += codes
        return (" AND ".join(conds) or "1"), params

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.kinds) or any(v is not None for v in (self.since, self.until, self.request))


def _expected_tables() -> dict[str, str]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(_SCHEMA)
    tables = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    conn.close()
    return tables


_TABLES = _expected_tables()
# meta keys whose values are read as numbers (counts, sizes)
_META_NUMBERS = ("version", "total_lines", "unknown_lines", "events", "bytes_read", "bytes_total", "build_seconds")


def _schema_ok(conn: sqlite3.Connection) -> bool:
    """Whether the database's tables are exactly the ones this qdebug creates (same columns, types and checks)."""
    return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")) == _TABLES


def _read_meta(conn: sqlite3.Connection) -> dict | None:
    """The meta table as values, or None when one is not what `finish` writes (ValueError for non-JSON text)."""
    meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
    for key in _META_NUMBERS:
        value = meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            return None
    sources, files = meta.get("sources", []), meta.get("files", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        return None
    changes = meta.get("changes", [])
    if not isinstance(changes, list) or not all(
            isinstance(c, dict) and isinstance(c.get("path"), str) and c.get("change") in ("grew", "shrank")
            and all(_count(c.get(k)) for k in ("size_at_start", "size_at_end", "bytes_read")) for c in changes):
        return None
    if not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("path"), str) and all(_count(f.get(k)) for k in ("first_line", "lines")) for f in files):
        return None
    return meta


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def event_from_row(row) -> Event:
    """An Event from an events-table row."""
    seq, line, t, kind, rid, donor, offset, text_offset, tokens, message = row
    if message is None:
        from .formats.log_scan import fast_message

        message = fast_message(kind, rid, offset, tokens)
    return Event(EVENT_KINDS[kind], rid, t=t, seq=seq, offset=offset, text_offset=text_offset, tokens=tokens,
                 donor=donor, line=line, message=message or "")


class LogIndex:
    """An SQLite index of one runtime log (or several, merged): write once with the add_* calls, then query."""

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn
        self.meta: dict = {}

    @classmethod
    def create(cls, path: Path) -> LogIndex:
        """A new, empty index at path (tuned for one bulk load: no journal, no fsync until finish)."""
        path.unlink(missing_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-16000;" + _SCHEMA)
        conn.execute("BEGIN")
        return cls(path, conn)

    @classmethod
    def open(cls, path: Path) -> LogIndex | None:
        """A finished index at path, or None (a cache miss: rebuild) when it is missing, not a regular file, unreadable,
        unfinished, of another version, or not exactly qdebug's tables and meta (a broken or hostile file)."""
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return None
            # rw (never create): filter indexes can be added later; a write-protected file opens read-only.
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, check_same_thread=False)
        except (OSError, sqlite3.Error):
            return None
        try:
            meta = _read_meta(conn) if _schema_ok(conn) else None
        except (sqlite3.Error, ValueError, RecursionError):  # not a database, non-JSON meta...
            meta = None
        if meta is None or meta.get("version") != INDEX_VERSION or meta.get("complete") is not True:
            conn.close()
            return None
        index = cls(path, conn)
        index.meta = meta
        return index

    def close(self) -> None:
        """Close the database."""
        self.conn.close()

    # -- writing ---------------------------------------------------------------------------------------
    def add_events(self, rows: list) -> None:
        """Append event rows (seq, line, t, kind code, rid, donor, offset, text_offset, tokens, message)."""
        # Binding a parameter costs about as much as storing it: the common rows bind only their non-NULL columns
        # (omitted columns are NULL, so the stored rows are the same; rowid order does not depend on insert order).
        short = [r[:5] for r in rows if r[5] is None and r[6] is None and r[7] is None and r[8] is None and r[9] is None]
        mid = [r[:5] + (r[6], r[8]) for r in rows if r[5] is None and r[6] is not None and r[7] is None and r[9] is None]
        if len(short) + len(mid) == len(rows):
            rest = ()
        else:
            rest = [r for r in rows if not (r[5] is None and r[7] is None and r[9] is None and (r[6] is not None or r[8] is None))]
        if short:
            self.conn.executemany("INSERT INTO events(seq, line, t, kind, rid) VALUES (?,?,?,?,?)", short)
        if mid:
            self.conn.executemany("INSERT INTO events(seq, line, t, kind, rid, offset, tokens) VALUES (?,?,?,?,?,?,?)", mid)
        if rest:
            self.conn.executemany("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?)", rest)

    def add_requests(self, rows: list) -> None:
        """Merge per-request aggregates (a request seen again later merges into its first row)."""
        self.conn.executemany(_UPSERT, rows)

    def add_overwrites(self, rows: list) -> None:
        """Overwrites of one request's buffer by another: (seq, victim, donor); finish() decides which count."""
        self.conn.executemany("INSERT INTO overwrites VALUES (?,?,?)", rows)

    def add_findings(self, seqs: list) -> None:
        """Events that are findings on their own (desync, shape mismatch, index out of bounds)."""
        self.conn.executemany("INSERT INTO findings VALUES (?)", [(s,) for s in seqs])

    def finish(self, meta: dict) -> None:
        """Decide contamination (overwrites before the victim's last sync), store meta, commit."""
        self.conn.executescript(_FINALISE)
        meta = {**meta, "version": INDEX_VERSION}
        self.conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, strict_json.dumps(v)) for k, v in meta.items()])
        self.conn.commit()
        self.meta = meta

    # -- reading ---------------------------------------------------------------------------------------
    def ensure_filter_indexes(self) -> None:
        """Indexes for filtered reads, made on first use (kept when the file is writable)."""
        for ddl in ("CREATE INDEX IF NOT EXISTS ev_rid ON events(rid)", "CREATE INDEX IF NOT EXISTS ev_donor ON events(donor)",
                    "CREATE INDEX IF NOT EXISTS ev_kind ON events(kind, seq)", "CREATE INDEX IF NOT EXISTS ev_t ON events(t)"):
            try:
                self.conn.execute(ddl)
            except sqlite3.OperationalError:  # read-only index: filters still work, by scanning
                return
        self.conn.commit()

    def count_events(self, flt: EventFilter | None = None) -> int:
        """How many events (pass the filter)."""
        if flt is None or not flt.active:
            return int(self.meta.get("events", 0)) or self.conn.execute("SELECT count(*) FROM events").fetchone()[0]
        where, params = flt.where()
        return self.conn.execute(f"SELECT count(*) FROM events e WHERE {where}", params).fetchone()[0]

    def events(self, flt: EventFilter | None = None, offset: int = 0, limit: int = -1) -> Iterator[Event]:
        """Events in source order, one page (offset, limit) at a time if asked, streamed from disk."""
        where, params = (flt or EventFilter()).where()
        cur = self.conn.execute(
            f"SELECT {_EVENT_COLS} FROM events e WHERE {where} ORDER BY e.seq LIMIT ? OFFSET ?", [*params, limit, offset]
        )
        return (event_from_row(r) for r in cur)

    def request_count(self) -> int:
        """How many requests the log mentions."""
        return self.conn.execute("SELECT count(*) FROM requests").fetchone()[0]

    def requests(self, request: str | None = None, worst_first: bool = False, limit: int = -1) -> Iterator[tuple]:
        """(id, verdict, donor, text_offset, visual_offset, line) in order of first mention (or worst first)."""
        cols = ("SELECT rid, rank, donor, CASE WHEN has_d THEN d_text END, "
                "CASE WHEN has_d THEN d_vis WHEN has_w THEN w_vis END, line FROM requests")
        if request is not None:
            parts = [(f"{cols} WHERE rid = ?", [request])]
        elif worst_first:  # the few flagged ones sorted, then the rest in order (no sort of every request)
            parts = [(f"{cols} WHERE rank > 0 ORDER BY rank DESC, ord LIMIT ?", [limit]),
                     (f"{cols} WHERE rank = 0 ORDER BY ord LIMIT ?", [limit])]
        else:
            parts = [(f"{cols} ORDER BY ord LIMIT ?", [limit])]

        def rows():
            left = limit
            for sql, params in parts:
                if left == 0:
                    return
                if params and params[-1] == limit:
                    params = [*params[:-1], left]
                for rid, rank, donor, t, v, line in self.conn.execute(sql, params):
                    yield rid, VERDICT_OF_CODE[rank], donor, t, v, line
                    left -= 1
        return rows()

    def verdict_counts(self) -> dict[str, int]:
        """Requests per verdict."""
        rows = self.conn.execute("SELECT rank, count(*) FROM requests GROUP BY rank").fetchall()
        return {VERDICT_OF_CODE[rank]: n for rank, n in rows}

    def findings(self, flt: EventFilter | None = None, limit: int = -1) -> Iterator[tuple[Event, bool]]:
        """(event, contaminating) for every event that is a finding, in source order."""
        where, params = (flt or EventFilter()).where()
        cur = self.conn.execute(
            f"SELECT {_EVENT_COLS}, c.seq IS NOT NULL FROM findings f JOIN events e ON e.seq = f.seq "
            f"LEFT JOIN contam c ON c.seq = f.seq WHERE {where} ORDER BY f.seq LIMIT ?", [*params, limit],
        )
        return ((event_from_row(r[:10]), bool(r[10])) for r in cur)

    def finding_counts(self) -> dict[str, int]:
        """Findings per kind (contamination, desync, shape_mismatch, index_out_of_bounds)."""
        n_contam = self.conn.execute("SELECT count(*) FROM contam").fetchone()[0]
        rows = self.conn.execute(
            "SELECT e.kind, count(*) FROM findings f JOIN events e ON e.seq = f.seq "
            "WHERE f.seq NOT IN (SELECT seq FROM contam) GROUP BY e.kind"
        ).fetchall()
        counts = {EVENT_KINDS[k]: n for k, n in rows}
        if n_contam:
            counts = {"contamination": n_contam, **counts}
        return counts

    def cells(self, request: str | None = None) -> Iterator[tuple[str, str, Event]]:
        """(victim, donor, the overwrite that decided it) for every contaminated request, in order of mention."""
        where, params = ("AND r.rid = ?", [request]) if request is not None else ("", [])
        cur = self.conn.execute(
            f"SELECT r.rid, r.donor, {_EVENT_COLS} FROM requests r JOIN events e ON e.seq = r.donor_seq "
            f"WHERE r.donor_seq IS NOT NULL {where} ORDER BY r.ord", params,
        )
        return ((row[0], row[1], event_from_row(row[2:])) for row in cur)

    def per_minute(self, kind: str = EventKind.BUFFER_OVERWRITE, contaminating_only: bool = False) -> list[tuple[int, int]]:
        """(minute since the epoch, count) of one kind of event, for events with a time."""
        if contaminating_only:
            sql = "SELECT CAST(e.t / 60 AS INTEGER) m, count(*) FROM contam c JOIN events e ON e.seq = c.seq WHERE e.t IS NOT NULL GROUP BY m ORDER BY m"
            return self.conn.execute(sql).fetchall()
        sql = "SELECT CAST(t / 60 AS INTEGER) m, count(*) FROM events WHERE kind = ? AND t IS NOT NULL GROUP BY m ORDER BY m"
        return self.conn.execute(sql, [EVENT_KINDS.index(kind)]).fetchall()

    def time_range(self) -> tuple[float | None, float | None]:
        """The first and last event time (None when the log has no timestamps)."""
        return tuple(self.conn.execute("SELECT min(t), max(t) FROM events").fetchone())
