"""LogIndex: a runtime log's events, requests and findings (Parquet, read with DuckDB), built once per file version (see cache_key)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from qdebug.vocab import EVENT_KINDS, EventKind

from .batch import Event

from .log_codes import INDEX_VERSION, VERDICT_OF_CODE

KIND_ALIASES = {"overwrite": EventKind.BUFFER_OVERWRITE, EventKind.DESYNC: EventKind.DESYNC, "shape": EventKind.SHAPE_MISMATCH, "oob": EventKind.INDEX_OUT_OF_BOUNDS}

_EVENT_COLS = 'e.seq, e.line, e.t, e.kind, e.rid, e.donor, e."offset", e.text_offset, e.tokens, e.message'


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


def file_identity(path: Path) -> str:
    """A log file's content identity, whatever its name: device, inode, size, mtime and a hash of its ends and of
    16 blocks spread through it. A file logrotate renamed keeps it (its index partition is reused under the new name);
    an appended or replaced file does not. The ctime is left out (a rename changes it), so a file rewritten in place
    with its size and mtime set back is noticed only where the change reaches its ends or a sampled block."""
    st = path.stat()
    return hashlib.sha256(json.dumps([INDEX_VERSION, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                                      _edge_hash(path, st.st_size, samples=16)]).encode()).hexdigest()[:32]


def _edge_hash(path: Path, size: int, samples: int = 0) -> str:
    """SHA-256 of the file's first and last EDGE_BYTES and of `samples` 4 KiB blocks evenly between ("" for what cannot
    be read here: the scan names the problem)."""
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return ""  # a pipe or device: opening it here could block
        with open(path, "rb") as f:
            digest.update(f.read(EDGE_BYTES))
            for k in range(1, samples + 1) if size > 2 * EDGE_BYTES else ():
                f.seek(EDGE_BYTES + (size - 2 * EDGE_BYTES) * k // (samples + 1))
                digest.update(f.read(4096))
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
        conds: list[str] = []
        params: list[float | str | int] = []
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
        return (" AND ".join(conds) or "true"), params

    @property
    def active(self) -> bool:
        """Whether any filter is set."""
        return bool(self.kinds) or any(v is not None for v in (self.since, self.until, self.request))


def event_from_row(row) -> Event:
    """An Event from an events-table row."""
    seq, line, t, kind, rid, donor, offset, text_offset, tokens, message = row
    if message is None:
        from .formats.log_line import fast_message

        message = fast_message(kind, rid, offset, tokens)
    return Event(EVENT_KINDS[kind], rid, t=t, seq=seq, offset=offset, text_offset=text_offset, tokens=tokens,
                 donor=donor, line=line, message=message or "")


class _Cursor:
    """A DuckDB result read like an sqlite3 cursor: fetchone, fetchall, fetchmany, and iteration (in pages)."""

    def __init__(self, result, conn: _Conn):
        self.result = result
        self.conn = conn

    def fetchone(self):
        with self.conn.reading():
            return self.result.fetchone()

    def fetchall(self):
        with self.conn.reading():
            return self.result.fetchall()

    def fetchmany(self, size: int = 1):
        with self.conn.reading():
            return self.result.fetchmany(size)

    def __iter__(self):
        while rows := self.fetchmany(10_000):
            yield from rows


class _Conn:
    """The index's tables as SQL (views events, requests, findings, contam): a fresh cursor per query, so threads
    (the TUI's workers) each read on their own. A file that cannot be read is a ReplayFormatError naming it."""

    def __init__(self, db, path: Path):
        self.db = db
        self.path = path

    def execute(self, sql: str, params=()) -> _Cursor:
        with self.reading():
            return _Cursor(self.db.cursor().execute(sql, list(params)), self)

    @contextmanager
    def reading(self):
        """Turns DuckDB's read errors (a Parquet page that does not decode) into one-line errors; a query a signal
        stopped is KeyboardInterrupt (or Terminated), never "cannot be read" (which would drop a good cached index)."""
        from .log_sql import duckdb_module, interruptible

        duckdb = duckdb_module()
        try:
            with interruptible():
                yield
        except duckdb.Error as exc:
            from qdebug.errors import ReplayFormatError

            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise ReplayFormatError(f"log index {self.path} cannot be read: {first} (expected Parquet files as qdebug "
                                    "wrote them: index the logs again)") from None

    def close(self) -> None:
        self.db.close()


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _merged_meta(manifests: list[dict]) -> dict:
    """One meta for several hosts' indexes: sums of the counts, the lists one after another, the hosts in order."""
    if len(manifests) == 1:
        return {**manifests[0], "hosts": [manifests[0]["host"]]}
    meta: dict = {"complete": all(m.get("complete") is True for m in manifests), "version": INDEX_VERSION,
                  "hosts": [m["host"] for m in manifests]}
    for key in ("total_lines", "unknown_lines", "events", "bytes_read", "bytes_total"):
        meta[key] = sum(int(m.get(key) or 0) for m in manifests)
    for key in ("sources", "files", "changes"):
        meta[key] = [x for m in manifests for x in m.get(key, [])]
    meta["build_seconds"] = round(sum(float(m.get("build_seconds") or 0) for m in manifests), 3)
    return meta


class LogIndex:
    """A runtime log's index (or several hosts' indexes read as one), queried with SQL in an embedded DuckDB."""

    def __init__(self, path: Path, folders: list[tuple[Path, dict]]):
        from .log_sql import connect

        self.path = path
        self.meta = _merged_meta([m for _, m in folders])
        self.hosts = self.meta["hosts"]
        self.conn = _Conn(connect(), path)
        self._views(folders)

    @classmethod
    def open(cls, path: Path, partial: bool = False) -> LogIndex | None:
        """The index in folder `path`, or None (a cache miss: rebuild) when it is missing, unfinished (unless
        `partial`), of another version, or not exactly qdebug's files (a broken or hostile folder)."""
        from .log_parquet import check_index

        manifest, _problem = check_index(path, INDEX_VERSION, partial)
        return None if manifest is None else cls(path, [(path, manifest)])

    @classmethod
    def open_folders(cls, paths: list[Path]) -> LogIndex:
        """Several index folders (hosts) read as one; ReplayFormatError naming the first that is no index."""
        from qdebug.errors import ReplayFormatError

        from .log_parquet import FORMAT, check_index

        folders = []
        for path in paths:
            manifest, problem = check_index(path, INDEX_VERSION)
            if manifest is None:
                shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
                raise ReplayFormatError(f"{shown} is not a log index: {problem} (expected a folder written by "
                                        f"`qdebug replay --index-only LOG --out DIR`, {FORMAT} version {INDEX_VERSION})")
            folders.append((path, manifest))
        hosts = [m["host"] for _, m in folders]
        if len(set(hosts)) < len(hosts):
            dup = next(h for h in hosts if hosts.count(h) > 1)
            raise ReplayFormatError(f"two indexes are of host {dup!r} (expected one index per host: index each host's "
                                    "logs together, or give --host NAME)")
        return cls(paths[0], folders)

    def _views(self, folders: list[tuple[Path, dict]]) -> None:
        """Views over the Parquet files: seq and ord run on from one host to the next; ids are host/id with several hosts."""
        from .log_parquet import FINDINGS, REQUESTS
        from .log_sql import sql_list

        many = len(folders) > 1
        events, requests, findings = [], [], []
        seq_base = ord_base = 0
        for folder, m in folders:
            host = _text(m["host"])

            def q(col: str) -> str:
                return f"{host} || '/' || {col}" if many else col
            msg = _fast_message_sql() if many else "message"
            cols = (f'seq + {seq_base} AS seq, line, t, kind, {q("rid")} AS rid, {q("donor")} AS donor, "offset", '
                    f"text_offset, tokens, {msg} AS message, host")
            events.append(f"SELECT {cols} FROM read_parquet({sql_list([folder / p['file'] for p in m['parts']])})")
            findings.append(f"SELECT {cols}, contaminating FROM read_parquet({sql_list([folder / FINDINGS])})")
            requests.append(f"SELECT ord + {ord_base} AS ord, {q('rid')} AS rid, line, rank, has_d, d_text, d_vis, has_w, "
                            f"w_vis, last_stitch + {seq_base} AS last_stitch, {q('donor')} AS donor, "
                            f"donor_seq + {seq_base} AS donor_seq, host FROM read_parquet({sql_list([folder / REQUESTS])})")
            rows = sum(p["rows"] for p in m["parts"])
            seq_base += rows
            ord_base += 2 * rows + 2  # past the host's last mention (2 * seq + 1)
        db = self.conn.db
        db.execute("CREATE VIEW events AS " + " UNION ALL ".join(events))
        db.execute("CREATE VIEW requests AS " + " UNION ALL ".join(requests))
        db.execute("CREATE VIEW findings AS " + " UNION ALL ".join(findings))
        db.execute("CREATE VIEW contam AS SELECT seq, rid AS victim, donor FROM findings WHERE contaminating")

    def close(self) -> None:
        """Close the database."""
        self.conn.close()

    # -- reading ---------------------------------------------------------------------------------------
    def ensure_filter_indexes(self) -> None:
        """Nothing to make: filtered reads scan the Parquet columns (row groups skipped by their statistics)."""

    def count_events(self, flt: EventFilter | None = None) -> int:
        """How many events (pass the filter)."""
        if flt is None or not flt.active:
            return int(self.meta.get("events", 0)) or self.conn.execute("SELECT count(*) FROM events").fetchone()[0]
        where, params = flt.where()
        return self.conn.execute(f"SELECT count(*) FROM events e WHERE {where}", params).fetchone()[0]

    def events(self, flt: EventFilter | None = None, offset: int = 0, limit: int = -1) -> Iterator[Event]:
        """Events in source order, one page (offset, limit) at a time if asked, streamed from disk."""
        flt = flt or EventFilter()
        where, params = flt.where()
        if not flt.active:  # seq runs 0, 1, 2... with no gap: a page is a range of it (no sort of every event)
            where, params = "e.seq >= ?" + ("" if limit < 0 else " AND e.seq < ?"), [offset] + ([] if limit < 0 else [offset + limit])
            page = ""
        else:
            page = ("" if limit < 0 else f" LIMIT {int(limit)}") + f" OFFSET {int(offset)}"
        cur = self.conn.execute(f"SELECT {_EVENT_COLS} FROM events e WHERE {where} ORDER BY e.seq{page}", params)
        return (event_from_row(r) for r in cur)

    def request_count(self) -> int:
        """How many requests the log mentions."""
        return self.conn.execute("SELECT count(*) FROM requests").fetchone()[0]

    def requests(self, request: str | None = None, worst_first: bool = False, limit: int = -1) -> Iterator[tuple]:
        """(id, verdict, donor, text_offset, visual_offset, line) in order of first mention (or worst first)."""
        cols = ("SELECT rid, rank, donor, CASE WHEN has_d THEN d_text END, "
                "CASE WHEN has_d THEN d_vis WHEN has_w THEN w_vis END, line FROM requests")
        cap = "" if limit < 0 else f" LIMIT {int(limit)}"
        if request is not None:
            parts = [(f"{cols} WHERE rid = ?", [request])]
        elif worst_first:  # the few flagged ones sorted, then the rest in order
            parts = [(f"{cols} WHERE rank > 0 ORDER BY rank DESC, ord{cap}", []),
                     (f"{cols} WHERE rank = 0 ORDER BY ord{cap}", [])]
        else:
            parts = [(f"{cols} ORDER BY ord{cap}", [])]

        def rows():
            left = limit
            for sql, params in parts:
                if left == 0:
                    return
                for rid, rank, donor, t, v, line in self.conn.execute(sql, params):
                    yield rid, VERDICT_OF_CODE[rank], donor, t, v, line
                    left -= 1
                    if left == 0:
                        return
        return rows()

    def verdict_counts(self) -> dict[str, int]:
        """Requests per verdict."""
        rows = self.conn.execute("SELECT rank, count(*) FROM requests GROUP BY rank ORDER BY rank").fetchall()
        return {VERDICT_OF_CODE[rank]: n for rank, n in rows}

    def findings(self, flt: EventFilter | None = None, limit: int = -1) -> Iterator[tuple[Event, bool]]:
        """(event, contaminating) for every event that is a finding, in source order."""
        where, params = (flt or EventFilter()).where()
        cap = "" if limit < 0 else f" LIMIT {int(limit)}"
        cur = self.conn.execute(f"SELECT {_EVENT_COLS}, e.contaminating FROM findings e WHERE {where} ORDER BY e.seq{cap}", params)
        return ((event_from_row(r[:10]), bool(r[10])) for r in cur)

    def finding_counts(self) -> dict[str, int]:
        """Findings per kind (contamination, desync, shape_mismatch, index_out_of_bounds)."""
        n_contam = self.conn.execute("SELECT count(*) FROM findings WHERE contaminating").fetchone()[0]
        rows = self.conn.execute("SELECT kind, count(*) FROM findings WHERE NOT contaminating GROUP BY kind ORDER BY kind").fetchall()
        counts = {EVENT_KINDS[k]: n for k, n in rows}
        if n_contam:
            counts = {"contamination": n_contam, **counts}
        return counts

    def cells(self, request: str | None = None, limit: int = -1) -> Iterator[tuple[str, str, Event]]:
        """(victim, donor, the overwrite that decided it) for every contaminated request (the first `limit`), in order
        of mention."""
        where, params = ("AND rid = ?", [request]) if request is not None else ("", [])
        cap = "" if limit < 0 else f" LIMIT {int(limit)}"
        # the page of victims first, then their overwrites: the join's table is theirs, not every finding's (at 10 M
        # lines, 37 MiB less for the report's first page)
        cur = self.conn.execute(
            f"WITH r AS (SELECT rid, donor, donor_seq, ord FROM requests WHERE donor_seq IS NOT NULL {where} "
            f"ORDER BY ord{cap}) "
            f"SELECT r.rid, r.donor, {_EVENT_COLS} FROM r JOIN (SELECT * FROM findings WHERE contaminating) e "
            f"ON e.seq = r.donor_seq ORDER BY r.ord", params,
        )
        return ((row[0], row[1], event_from_row(row[2:])) for row in cur)

    def per_minute(self, kind: str = EventKind.BUFFER_OVERWRITE, contaminating_only: bool = False) -> list[tuple[int, int]]:
        """(minute since the epoch, count) of one kind of event, for events with a time."""
        if contaminating_only:
            sql = "SELECT floor(t / 60)::BIGINT m, count(*) FROM findings WHERE contaminating AND t IS NOT NULL GROUP BY m ORDER BY m"
            return self.conn.execute(sql).fetchall()
        sql = "SELECT floor(t / 60)::BIGINT m, count(*) FROM events WHERE kind = ? AND t IS NOT NULL GROUP BY m ORDER BY m"
        return self.conn.execute(sql, [EVENT_KINDS.index(kind)]).fetchall()

    def time_range(self) -> tuple[float | None, float | None]:
        """The first and last event time (None when the log has no timestamps)."""
        return tuple(self.conn.execute("SELECT min(t), max(t) FROM events").fetchone())


def _fast_message_sql() -> str:
    """SQL for an event's message: the stored one, else (a fast-shape line) the one log_line.fast_message rebuilds."""
    from .formats.log_line import _FAST_MESSAGE

    cases = " ".join(f"WHEN {kind} THEN {_text(fmt.split('{rid}')[0])} || rid || {_message_tail(fmt)}"
                     for kind, fmt in _FAST_MESSAGE.items())
    return f"coalesce(message, CASE kind {cases} END)"


def _message_tail(fmt: str) -> str:
    tail = fmt.split("{rid}")[1]
    if "{tokens}" not in tail:
        return _text(tail)
    before, rest = tail.split("{tokens}")
    middle, after = rest.split("{offset}")
    return f"{_text(before)} || tokens || {_text(middle)} || \"offset\" || {_text(after)}"
