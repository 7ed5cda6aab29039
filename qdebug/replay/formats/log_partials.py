"""A chunk's share of each request's summary, for the verdict SQL (log_sql): its common-shape rows folded by request
id, and the rows the SQL must still read one by one.

Per request id among the chunk's encode, write, sync and first-token rows (the native pass folds them): where it is
first mentioned (`ord`, `line`), its last buffer write (`w_seq`, `w_off`) and its last sync (`last_stitch`), numbered
as the events are. Every aggregate the SQL takes is a min or a max, so a request's partials from several chunks, and
its other rows read whole, merge into exactly what its events alone give. The raw rows: the rare shapes (overwrites,
desyncs, errors: the findings), and whatever the line-by-line reference recognised; a chunk the native pass did not
fold (the RE2 passes, an impossible date) is all raw.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qdebug.vocab import EventKind

from .log_line import KIND_CODE
from .log_pool import ChunkPool

PARTIAL_SCHEMA = pa.schema([("rid", pa.string()), ("ord", pa.int64()), ("line", pa.int64()), ("w_seq", pa.int64()),
                            ("w_off", pa.int64()), ("last_stitch", pa.int64())])
# The kinds the native pass folds, the common shapes' (log_columns._WHERE), as a lookup by kind code. Any other row is raw.
_FOLDED = np.zeros(256, np.bool_)
_FOLDED[[KIND_CODE[k] for k in (EventKind.ENCODE_START, EventKind.FIRST_TOKEN, EventKind.BUFFER_WRITE, EventKind.SYNC)]] = True


class Summary(NamedTuple):
    """A chunk's partials (PARTIAL_SCHEMA) and raw rows (the events table's schema)."""

    partials: pa.Table
    raw: pa.Table


class Fold(NamedTuple):
    """What the native pass folded, by its own row numbers: each row's line index, id and offset, and per request id
    its first row, last write and last sync (-1: none)."""

    at: np.ndarray
    rid: pa.Array
    offset: np.ndarray
    first: np.ndarray
    write: np.ndarray
    stitch: np.ndarray


def unfolded(table: pa.Table) -> Summary:
    """A chunk with no partials: every row raw."""
    return Summary(PARTIAL_SCHEMA.empty_table(), table)


def summarise(table: pa.Table, seq: int, line0: int, fold: Fold, slow_at: np.ndarray) -> Summary:
    """The summary of a chunk whose events table (seqs from `seq`, lines from line0 + 1) merged the folded rows with the
    reference's rows at line indices slow_at (sorted)."""
    n = table.num_rows
    # a folded row's place among the chunk's events: its own number, plus the reference's rows on lines before it
    pos = np.arange(len(fold.at), dtype=np.int64) + (np.searchsorted(slow_at, fold.at) if len(slow_at) else 0)
    common = np.zeros(n, np.bool_)
    common[pos] = _FOLDED[table.column("kind").to_numpy()[pos].view(np.uint8)]
    raw = table.take(pa.array(np.flatnonzero(~common)))  # a few rows in a hundred: taken, not filtered

    def seqs(rows: np.ndarray) -> pa.Array:
        none = rows < 0
        return pa.array(np.where(none, 0, seq + pos[rows]), pa.int64(), mask=none)

    first = fold.first.astype(np.int64)
    partials = pa.table([fold.rid.take(pa.array(first)), pa.array(2 * (seq + pos[first]) + 1),
                         pa.array(line0 + 1 + fold.at[first]), seqs(fold.write),
                         pa.array(fold.offset[fold.write], pa.int64(), mask=fold.write < 0), seqs(fold.stitch)],
                        schema=PARTIAL_SCHEMA)
    return Summary(partials, raw)


def renumber(summary: Summary, line0: int, seq: int) -> Summary:
    """The summary with its lines and seqs counted from the start of the whole scan (its raw rows as the events are)."""
    p = summary.partials
    if p.num_rows and (line0 or seq):
        p = p.set_column(1, "ord", pc.add(p.column(1), 2 * seq))
        p = p.set_column(2, "line", pc.add(p.column(2), line0))
        for i in (3, 5):
            p = p.set_column(i, PARTIAL_SCHEMA.names[i], pc.add(p.column(i), seq))
    return Summary(p, ChunkPool.renumber(summary.raw, line0, seq))
