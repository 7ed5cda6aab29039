"""Verdicts and findings of a log, in SQL (DuckDB) over its events' Parquet: what the old per-event Python loop decided.
The scan hands over each chunk's common-shape rows folded per request (log_partials); the SQL merges those and reads
the other rows one by one. A request folded in one chunk and mentioned nowhere else (most) is final as folded: only the
others go through the GROUP BY.

A request's row (in no particular order: readers sort by `ord`): `ord`, where it is first mentioned (an order, not a
count: no sort of a million requests to number them),
its first mention (an overwrite mentions its writer, the donor, just before its victim), the worst of
its own events (desync 2, shape mismatch or index out of bounds 1), its last desync's offsets, its last own buffer write
(an overwrite is the donor's write), its last sync. An overwrite by another request contaminates the victim when it
comes before the victim's last sync (or the victim never synced); the victim's donor is the last such overwrite's.
"""

from __future__ import annotations

import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from qdebug.vocab import EventKind, Verdict

from .heap import give_back_memory
from .log_codes import INDEX_CODEC, kind_code, verdict_code


def duckdb_module():
    """DuckDB, imported with Ctrl-C and SIGTERM held: a signal inside its import aborted the process (exit -6)."""
    from qdebug.signals import deferred

    with deferred():
        import duckdb
    return duckdb


def is_interrupted_query(exc: BaseException) -> bool:
    """Whether a DuckDB error is its word for a query a signal stopped: it swallows the KeyboardInterrupt and raises
    RuntimeError("Query interrupted") or InterruptException instead, or, when the signal came while it was calling back
    into Python (reading a registered frame's schema), an error that quotes the exception ("...failed: Terminated: ")."""
    from qdebug.signals import terminated_this_run

    if type(exc).__name__ == "InterruptException" or (type(exc) is RuntimeError and str(exc) == "Query interrupted"):
        return True
    said = str(exc)
    return terminated_this_run() or "KeyboardInterrupt" in said or ": Terminated" in said


@contextmanager
def interruptible():
    """A query stopped by Ctrl-C or SIGTERM raises KeyboardInterrupt (Terminated after SIGTERM), as Python code does."""
    try:
        yield
    except Exception as exc:
        if not is_interrupted_query(exc):
            raise
        from qdebug.signals import interruption

        raise interruption() from None


def connect(memory_mb: int = 64, database: str = ":memory:"):
    """A DuckDB bounded in memory (it spills to a temp folder beyond) on at most two threads."""
    duckdb = duckdb_module()
    con = duckdb.connect(database)
    con.execute(f"SET memory_limit = '{memory_mb}MB'")
    con.execute("SET threads = 2")
    con.execute("SET preserve_insertion_order = false")  # every query that needs an order says ORDER BY
    return con


def sql_list(paths: list[Path]) -> str:
    """A DuckDB list literal of file paths, each naming exactly that file (never a glob pattern: see literal_path)."""
    return "[" + ", ".join("'" + literal_path(p).replace("'", "''") + "'" for p in paths) + "]"


_GLOB_CHARS = re.compile(r"([*?\[])")


def literal_path(path: Path | str) -> str:
    """A path as DuckDB's file readers take it literally: they expand `*`, `?` and `[...]` in every name (a folder
    `idx[1]` read `idx1`'s files), so each is written as a one-character class (`[[]`), which matches only itself.
    DuckDB also splits a pattern at backslashes: a path holding both cannot be said, a one-line error."""
    text = str(path)
    if not _GLOB_CHARS.search(text):
        return text
    if "\\" in text:
        from qdebug.errors import InputError

        raise InputError(f"{text[:200]}: a path holding both a backslash and one of * ? [ cannot be given to DuckDB "
                         "(expected a folder name without them: rename it)")
    return _GLOB_CHARS.sub(r"[\1]", text)


# (memory limit MB, threads) tried in turn: DuckDB spills most work to disk, but a hash aggregate over a million
# requests can still run out of memory; a bigger limit then finishes it. One thread, not two: on the 10 M-line
# benchmark log, 96 MB on two threads ran out in half of the runs (and 128 MB in two of three), then paid for both
# attempts. 48 MB since only the requests the partials do not settle are aggregated: the SQL's peak at 10 M lines is
# 167-184 MiB against 180-194 at 80 MB; it finished at 20 M lines (32 MB did not: 24 MB not even at 10 M), and the
# unfolded paths (every event raw: the RE2 passes) finished at 10 M lines under it too.
# A bound the index can always be built under beats a tighter one that sometimes fails.
_BUDGETS = ((48, 1), (160, 1), (2048, 1))


def derive_tables(parts: list[tuple[Path, tuple[Path, Path] | None]], requests: Path, findings: Path, tmp: Path,
                  host: str, schemas: tuple) -> None:
    """Write requests.parquet and findings.parquet (in `schemas`, log_parquet's) from the events partitions
    (absolute seq and line numbers), each with its summary's files (log_partials: partials, raw rows) when the scan
    made them, else read whole."""
    duckdb = duckdb_module()
    for i, (memory_mb, threads) in enumerate(_BUDGETS):
        try:
            with interruptible():
                return _derive(parts, requests, findings, tmp, host, schemas, memory_mb, threads)
        except duckdb.OutOfMemoryException:
            if i == len(_BUDGETS) - 1:
                raise


def _derive(parts: list[tuple[Path, tuple[Path, Path] | None]], requests: Path, findings: Path, tmp: Path, host: str,
            schemas: tuple, memory_mb: int, threads: int) -> None:
    """derive_tables within one memory limit and thread count."""
    over, write, sync, desync, shape, oob = (kind_code(k) for k in (
        EventKind.BUFFER_OVERWRITE, EventKind.BUFFER_WRITE, EventKind.SYNC, EventKind.DESYNC,
        EventKind.SHAPE_MISMATCH, EventKind.INDEX_OUT_OF_BOUNDS))
    error, desynced, contaminated = (verdict_code(v) for v in (Verdict.ERROR, Verdict.DESYNC, Verdict.CONTAMINATED))
    partials = [summary[0] for _, summary in parts if summary is not None]
    raw = [events if summary is None else summary[1] for events, summary in parts]  # in seq order, file after file
    # In memory, with a spill folder in the index folder (removed after): what outgrows the memory limit (the GROUP BY
    # of every request where nothing was folded: the RE2 passes, a partition reused from an earlier index) is paged to
    # disk by the buffer manager instead of failing at the limit. (A database file cost 3 MiB more at 10 M lines.)
    con = connect(memory_mb)
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET temp_directory = '{_q(tmp / '.spill')}'")
    try:
        # `raw`: the events read one by one (the rare shapes, the reference's rows, and every event of a partition
        # with no summary); the common shapes' rows come folded, a partial per request and chunk.
        con.execute(f"CREATE VIEW raw AS SELECT * FROM read_parquet({sql_list(raw)})")
        # Each mention of a request: pos orders them (an overwrite's donor, pos 2*seq, before its victim, 2*seq + 1);
        # an overwrite is also the donor's own write. A million requests' states must fit the memory limit, so each
        # aggregate is a fixed-size number: the first mention's line is the least line (seq and line grow together),
        # and (seq, offset + 1, 0 for none) packed into one HUGEINT, whose max picks the last write's offset (arg_max
        # states are several times larger). Every aggregate is a min or a max: partials merge as their rows would.
        # Only the partials of ids mentioned elsewhere too (`shared`) are merged here; the rest are requests already.
        if partials:
            _register_shared(con, partials, raw, over)
            give_back_memory()  # the hashes' arrays: freed to glibc, where DuckDB would not reuse them
        folded = (f"""SELECT rid, ord AS pos, line, 0 AS rank, (w_seq::HUGEINT << 64) | coalesce(w_off + 1, 0) AS w,
                             last_stitch
                      FROM read_parquet({sql_list(partials)}) WHERE hash(rid) IN (SELECT h FROM shared) UNION ALL"""
                  if partials else "")
        # m: each mention of a request, as a row of the aggregates below (pos, line, rank, w, last_stitch)
        con.execute(f"""
            CREATE VIEW m AS
              {folded}
              SELECT rid, seq * 2 + 1 AS pos, line,
                     CASE WHEN kind = {desync} THEN {desynced} WHEN kind IN ({shape}, {oob}) THEN {error} ELSE 0 END AS rank,
                     CASE WHEN kind = {write} THEN (seq::HUGEINT << 64) | coalesce("offset" + 1, 0) END AS w,
                     CASE WHEN kind = {sync} THEN seq END AS last_stitch
              FROM raw WHERE rid IS NOT NULL
              UNION ALL
              SELECT donor, seq * 2, line, 0, (seq::HUGEINT << 64) | coalesce("offset" + 1, 0), NULL
              FROM raw WHERE kind = {over} AND donor IS NOT NULL""")
        # Every request's aggregates (of those the partials alone do not settle), once, into a temporary table (in
        # memory, paged to the temp folder beyond the limit): not aggregated inside the query that streams out, which
        # ran out of memory in one run of four at 20 M lines, 80 MB, when every request went through it.
        con.execute("""
            CREATE TEMP TABLE agg AS SELECT rid, min(pos) AS ord, min(line) AS line, max(rank) AS rank, max(w) AS w,
                                            max(last_stitch) AS last_stitch FROM m GROUP BY rid""")
        # An overwrite by another request before the victim's last sync (read from agg: a victim is in a raw row, so
        # never settled by its partials alone).
        con.execute(f"""
            CREATE TABLE contam AS
            SELECT e.seq, e.rid AS victim, e.donor FROM raw e JOIN agg r ON r.rid = e.rid
            WHERE e.kind = {over} AND e.donor <> e.rid AND (r.last_stitch IS NULL OR e.seq < r.last_stitch)""")
        contaminating = con.execute("SELECT seq FROM contam ORDER BY seq").fetchnumpy()["seq"]
        _write_findings(con, contaminating, (desync, shape, oob, over), findings, schemas[1])
        give_back_memory()  # the findings' Arrow batches, likewise
        con.execute(f"""
            CREATE TABLE des AS SELECT rid, arg_max_null(text_offset, seq) AS d_text, arg_max_null("offset", seq) AS d_vis
            FROM raw WHERE kind = {desync} AND rid IS NOT NULL GROUP BY rid""")
        _stream_to_parquet(con, [f"""
              SELECT a.ord, a.rid, a.line,
                     (CASE WHEN c.donor_seq IS NOT NULL THEN {contaminated} ELSE a.rank END)::TINYINT AS rank,
                     d.rid IS NOT NULL AS has_d, d.d_text::BIGINT AS d_text, d.d_vis::BIGINT AS d_vis, a.w IS NOT NULL AS has_w,
                     (nullif(a.w & 18446744073709551615, 0) - 1)::BIGINT AS w_vis,
                     a.last_stitch::BIGINT AS last_stitch, c.donor, c.donor_seq::BIGINT AS donor_seq,
                     '{_q(host)}'::VARCHAR AS host
              FROM agg a
              LEFT JOIN des d ON d.rid = a.rid
              LEFT JOIN (SELECT victim, max(seq) AS donor_seq, arg_max(donor, seq) AS donor FROM contam GROUP BY victim) c
                ON c.victim = a.rid
              """] + ([f"""
              SELECT ord, rid, line, 0::TINYINT AS rank, false AS has_d, NULL::BIGINT AS d_text, NULL::BIGINT AS d_vis,
                     w_seq IS NOT NULL AS has_w, nullif(coalesce(w_off + 1, 0), 0) - 1 AS w_vis, last_stitch,
                     NULL::VARCHAR AS donor, NULL::BIGINT AS donor_seq, '{_q(host)}'::VARCHAR AS host
              FROM read_parquet({sql_list(partials)}) WHERE hash(rid) NOT IN (SELECT h FROM shared)"""] if partials else []),
              requests, schemas[0])  # unsorted: every reader says ORDER BY ord, and a sort here cost memory and time
    finally:
        con.close()
        shutil.rmtree(tmp / ".spill", ignore_errors=True)


# How many mentions' hashes are sorted at once (8 bytes each: 16 MiB, twice that while they are gathered): a bigger
# log's are counted a slice of the hash space at a time, so memory stays bounded whatever the log's length.
_HASHES_AT_ONCE = 1 << 21


def _register_shared(con, partials: list[Path], raw: list[Path], over: int) -> None:
    """Make table `shared`: the hashes of the request ids a partial alone does not settle, those in two partials or in
    a raw row. The others (most: a request's lines are near each other, in one chunk) are final as they are, and the
    GROUP BY of a million ids, the SQL's largest working set, shrinks to theirs. A hash that two ids share only sends
    both through the GROUP BY: the hashes are counted in a sorted array (8 bytes a mention), not grouped; the table
    itself is DuckDB's (paged to disk beyond the memory limit)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    mentions = sum(pq.read_metadata(p).num_rows for p in partials) + 2 * sum(pq.read_metadata(r).num_rows for r in raw)
    slices = max(1, -(-mentions // _HASHES_AT_ONCE))
    con.execute("CREATE TEMP TABLE shared (h UBIGINT)")
    for k in range(slices):
        query = f"""SELECT h FROM (SELECT hash(rid) AS h FROM read_parquet({sql_list(partials)})
                                   UNION ALL SELECT hash(rid) FROM raw WHERE rid IS NOT NULL
                                   UNION ALL SELECT hash(donor) FROM raw WHERE kind = {over} AND donor IS NOT NULL)
                    {'' if slices == 1 else f'WHERE h % {slices} = {k}'}"""
        hashes = np.concatenate([np.zeros(0, np.uint64)] + [batch.column(0).to_numpy() for batch in
                                                             con.sql(query).to_arrow_reader(1 << 16)])
        hashes.sort()
        con.register("twice", pa.table({"h": np.unique(hashes[1:][hashes[1:] == hashes[:-1]])}))
        del hashes
        con.execute("INSERT INTO shared SELECT h FROM twice")
        con.unregister("twice")


def _write_findings(con, contaminating, kinds: tuple[int, int, int, int], path: Path, schema) -> None:
    """findings.parquet: the raw rows that are findings (desyncs, errors, and the overwrites whose seqs are in the
    sorted array `contaminating`), streamed in seq order as the raw rows are (one thread, insertion order kept) and
    written as they come: no sort of them all, a few batches in memory, row groups of about 16 k rows."""
    import numpy as np
    import pyarrow as pa

    *findings, over = kinds
    last = max(len(contaminating) - 1, 0)
    query = f"SELECT * FROM raw WHERE kind IN ({', '.join(str(k) for k in kinds)})"
    con.execute("SET preserve_insertion_order = true")
    try:
        with _Grouped(path, schema, ["seq", "line", "t", "kind", "contaminating"]) as writer:
            for batch in con.sql(query).to_arrow_reader(1 << 13):
                kind, seq = batch.column("kind").to_numpy(), batch.column("seq").to_numpy()
                contam = (kind == over) & (contaminating[np.minimum(np.searchsorted(contaminating, seq), last)] == seq
                                           if len(contaminating) else False)
                keep = np.isin(kind, findings) | contam
                writer.add(batch.filter(pa.array(keep)).append_column("contaminating", pa.array(contam[keep])))
    finally:
        con.execute("SET preserve_insertion_order = false")


class _Grouped:
    """An index file (the index's codec, statistics on `stats` alone) fed small Arrow batches (a small peak) and written
    in row groups of about 16 k rows."""

    def __init__(self, path: Path, schema, stats: list[str], rows: int = 1 << 14):
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(path, schema, compression=INDEX_CODEC, use_dictionary=["host"],
                                       write_statistics=stats)
        self.schema, self.rows = schema, rows
        self.pending: list = []
        self.count = 0

    def add(self, batch) -> None:
        """Queue a batch; write a row group once enough rows are queued."""
        self.pending.append(batch)
        self.count += batch.num_rows
        if self.count >= self.rows:
            self.flush()

    def flush(self) -> None:
        """Write what is queued as one row group."""
        import pyarrow as pa

        if self.count:
            table = pa.Table.from_batches(self.pending)
            self.writer.write_table(table if table.schema.equals(self.schema) else table.cast(self.schema))
        self.pending, self.count = [], 0

    def __enter__(self) -> _Grouped:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if exc[0] is None:
                self.flush()
        finally:
            self.writer.close()


def _stream_to_parquet(con, queries: list[str], path: Path, schema) -> None:
    """requests.parquet from the queries' rows, one after the other, streamed in batches and written by Arrow's Parquet
    writer (a third less CPU than DuckDB's COPY for these thirteen mostly-null columns, measured at 10 M lines)."""
    # statistics on what readers filter by (a page of the flagged ones, the victims): ids are in no order, so the min
    # and max of a row group's ids would skip nothing
    with _Grouped(path, schema, ["ord", "rank", "donor_seq"]) as writer:
        for query in queries:
            for batch in con.sql(query).to_arrow_reader(1 << 13):  # small batches, a small peak
                writer.add(batch)


def _q(text: Path | str) -> str:
    """A path or word inside an SQL string literal."""
    return str(text).replace("'", "''")
