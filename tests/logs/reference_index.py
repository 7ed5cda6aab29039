"""The reference a log index is checked against: lines recognised one by one (log_line._scan_lines) and each request's
verdict inputs aggregated event by event in Python, as the SQLite index's builder did before the index became Parquet."""

from __future__ import annotations

from pathlib import Path

from qdebug.replay.formats.log_line import KIND_CODE, _scan_lines, _seconds_cache
from qdebug.replay.log_codes import CODE_OF_VERDICT
from qdebug.vocab import EventKind, Verdict

_OVER, _WRITE, _SYNC, _DESYNC = (KIND_CODE[k] for k in (EventKind.BUFFER_OVERWRITE, EventKind.BUFFER_WRITE, EventKind.SYNC, EventKind.DESYNC))
_ERRORS = {KIND_CODE[EventKind.SHAPE_MISMATCH], KIND_CODE[EventKind.INDEX_OUT_OF_BOUNDS]}


def reference_tables(path: Path) -> dict[str, list]:
    """events, requests, contam and findings of a (small enough) log, the slow and obvious way."""
    lines = path.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rows, _seq, _unknown = _scan_lines(lines, 0, 0, _seconds_cache())
    state: dict[str, list] = {}  # rid -> [ord, line, rank, has_d, d_text, d_vis, has_w, w_vis, last_stitch]

    def mention(rid: str, line: int) -> list:
        if rid not in state:
            state[rid] = [len(state), line, 0, False, None, None, False, None, None]
        return state[rid]

    overwrites = []
    for seq, line, _t, kind, rid, donor, offset, text_offset, _tokens, _msg in rows:
        if kind == _OVER:
            d = mention(donor, line)
            mention(rid, line)
            d[6], d[7] = True, offset  # the overwrite is the donor's own write
            if donor != rid:
                overwrites.append((seq, rid, donor))
            continue
        if rid is None:
            continue
        s = mention(rid, line)
        if kind == _WRITE:
            s[6], s[7] = True, offset
        elif kind == _SYNC:
            s[8] = seq
        elif kind == _DESYNC:
            s[3], s[4], s[5] = True, text_offset, offset
            s[2] = max(s[2], CODE_OF_VERDICT[Verdict.DESYNC])
        elif kind in _ERRORS:
            s[2] = max(s[2], CODE_OF_VERDICT[Verdict.ERROR])
    contam = [(seq, victim, donor) for seq, victim, donor in overwrites
              if state[victim][8] is None or seq < state[victim][8]]
    last = {victim: (seq, donor) for seq, victim, donor in contam}
    requests = []
    for rid, (o, line, rank, has_d, d_text, d_vis, has_w, w_vis, stitch) in state.items():
        donor_seq, donor = last.get(rid, (None, None))
        rank = CODE_OF_VERDICT[Verdict.CONTAMINATED] if donor_seq is not None else rank
        requests.append((o, rid, line, rank, has_d, d_text, d_vis, has_w, w_vis, stitch, donor, donor_seq))
    contaminating = {seq for seq, _, _ in contam}
    findings = sorted([(r[0], False) for r in rows if r[3] in _ERRORS | {_DESYNC}] + [(s, True) for s in contaminating])
    return {"events": rows, "requests": requests, "contam": contam, "findings": findings}


def index_tables(index) -> dict[str, list]:
    """The same tables read back from a LogIndex with SQL."""
    q = index.conn.execute
    return {
        "events": q('SELECT seq, line, t, kind, rid, donor, "offset", text_offset, tokens, message FROM events ORDER BY seq').fetchall(),
        # ord is where a request is first mentioned (an order key): its rank among them is the reference's count
        "requests": q("SELECT (row_number() OVER (ORDER BY ord) - 1) AS ord, rid, line, rank, has_d, d_text, d_vis, has_w, "
                      "w_vis, last_stitch, donor, donor_seq FROM requests ORDER BY ord").fetchall(),
        "contam": q("SELECT seq, victim, donor FROM contam ORDER BY seq").fetchall(),
        "findings": q("SELECT seq, contaminating FROM findings ORDER BY seq").fetchall(),
    }
