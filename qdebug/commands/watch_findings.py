"""`qdebug replay FINDINGS_LOG...`: the watch's findings logs (docs/watch.md) shown, and indexed for a fleet.

`qdebug replay findings.log` prints each finding (time, host, check, outcome, stage, request, donors, co-batched,
evidence) and exits 1 when one is a violation; `--index-only --out DIR [--host NAME]` writes `DIR/findings.parquet`
(one row a finding; list fields as lists), so several hosts' folders read as one table in DuckDB:
`SELECT * FROM read_parquet('*/findings.parquet')`. DIR is checked before any log is read, as the log index's is
(analysis/log_index_out.py): new, empty, or holding only a findings index a previous run wrote (its Parquet metadata
says so); a user's file is never replaced.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from pathlib import Path

from qdebug.errors import InputError, OutputError
from qdebug.shown import shown

INDEX_NAME = "findings.parquet"
INDEX_TAG = (b"qdebug", b"watch-findings-index")  # a Parquet metadata key and value: an index a later run may replace
_TMP = re.compile(r"\.findings\.parquet\.\d+\.tmp")  # write_index's temporary (a killed run's is not in the way)
SNIFF_BYTES = 65536


def is_findings_log(path: Path) -> bool:
    """Whether a file's first non-empty line is a watch findings line (a folder or unreadable file: False)."""
    from qdebug.engine.watch_log import parse_line

    try:
        if not path.is_file():
            return False
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    for line in head.splitlines():
        if line.strip():
            return parse_line(line) is not None
    return False


def read_logs(files: list[Path]) -> list:
    """Every finding of the logs, in time order; a line that is not a findings line is a one-line error naming it."""
    from qdebug.engine.watch_log import parse_line

    from .watch_folder import open_regular

    out = []
    for path in files:
        try:
            raw = open_regular(str(path), "a findings log, a regular file")  # a FIFO or device: refused, never waited on
            if raw is None:
                raise InputError(f"{shown(path, 300)}: not found (expected a findings log)")
            with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    finding = parse_line(line)
                    if finding is None:
                        raise InputError(f"{path}:{number}: not a qdebug watch findings line (expected TIME LEVEL qdebug.watch: host=... check=... evidence=...)")
                    out.append(finding)
        except OSError as exc:
            raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    out.sort(key=lambda f: f.time)
    return out


def show_findings(findings: list, console, json_out: str | None) -> None:
    """The findings as a table on the console, and as JSON to a path or `-` (stdout)."""
    from rich.table import Table

    from qdebug.render.data_text import data

    if json_out is not None:
        text = json.dumps({"findings": [f.to_json() for f in findings],
                           "violations": sum(f.outcome == "violation" for f in findings)}, indent=1)
        if json_out == "-":
            print(text)
        else:
            _write_atomic(Path(json_out), text.encode("utf-8"))
    table = Table(title=f"{len(findings)} watch findings", show_lines=False)
    for column in ("time", "host", "check", "outcome", "stage", "request", "donors", "co-batched", "evidence"):
        table.add_column(column, overflow="fold")
    for f in findings:  # every field is the log's text: data, never markup
        table.add_row(*(data(cell) for cell in (f.time, f.host or "-", f.check, f.outcome, f.stage or "-", f.request_id or "-",
                                                 ",".join(f.donors) or "-", ",".join(f.cobatched) or "-", f.evidence)))
    console.print(table)
    violations = sum(f.outcome == "violation" for f in findings)
    console.print(f"{violations} violation(s), {len(findings) - violations} failed check(s)")


def write_index(findings: list, out: Path, host: str | None) -> Path:
    """`out/findings.parquet`: one row a finding (`host` replaced by `host` when given); written whole or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{**f.to_json(), "host": host or f.host} for f in findings]
    columns = {k: [r[k] for r in rows] for k in ("time", "host", "check", "outcome", "stage", "request_id", "client_id", "trace", "evidence")}
    table = pa.table({**{k: pa.array(v, pa.string()) for k, v in columns.items()},
                      "donors": pa.array([r["donors"] for r in rows], pa.list_(pa.string())),
                      "cobatched": pa.array([r["cobatched"] for r in rows], pa.list_(pa.string()))})
    table = table.replace_schema_metadata(dict([INDEX_TAG]))
    target = out / INDEX_NAME
    tmp = out / f".{INDEX_NAME}.{os.getpid()}.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"--out {shown(out, 200)}: cannot be written ({exc.strerror or type(exc).__name__}); nothing "
                          "there was replaced") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target


def check_index_out(out: Path) -> None:
    """OutputError (one line, before any log is read) unless --out is a new or empty folder, or one holding only a
    findings index a previous --index-only wrote: a user's file there (or a file, not a folder) is never replaced."""
    from qdebug.outputs import check_creatable, probe_folder

    where = f"--out {shown(out, 200)}"
    expected = "expected a new or empty folder, or one a previous --index-only of a findings log wrote"
    try:
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise OutputError(f"{where}: already exists and is not a folder ({expected})")
        if not out.exists():
            check_creatable(out, where)
            return
        names = {p.name for p in out.iterdir() if not _TMP.fullmatch(p.name)}
        others = sorted(names - {INDEX_NAME})
        if others:
            raise OutputError(f"{where}: {shown(others[0], 200)} in it is not a findings index (nothing there is replaced) "
                              f"({expected})")
        if INDEX_NAME in names and not is_findings_index(out / INDEX_NAME):
            raise OutputError(f"{where}: {INDEX_NAME} in it is not one qdebug wrote (nothing there is replaced) ({expected})")
        probe_folder(out, where)
    except OSError as exc:  # a name too long, a loop of links, a folder that cannot be listed
        raise OutputError(f"{where}: unusable ({exc.strerror or type(exc).__name__}) ({expected})") from None


def is_findings_index(path: Path) -> bool:
    """Whether `path` is a regular Parquet file whose metadata says write_index wrote it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        meta = pq.read_metadata(path).metadata or {}
    except (OSError, ValueError, pa.ArrowException):
        return False
    return meta.get(INDEX_TAG[0]) == INDEX_TAG[1]


def findings_command(files: list[Path], index_only: bool, out: Path | None, host: str | None, json_out: str | None,
                     exit_zero: bool, console, status) -> int:
    """`qdebug replay` on findings logs: show them (exit 1 on a violation) or, with --index-only, index them."""
    if index_only or out is not None or host is not None:
        if not index_only or out is None:
            raise InputError("--out and --host go with --index-only (expected `qdebug replay --index-only LOG... --out DIR`)")
        if host is not None and (not host.strip() or "/" in host or len(host) > 200):
            raise InputError(f"--host {host!r}: not a host name (expected a name without '/')")
        check_index_out(out)
        findings = read_logs(files)
        target = write_index(findings, out, host)
        from qdebug.render.data_text import data

        status.print(data(f"indexed {len(findings)} watch findings into {target}"))  # a path is data, never markup
        return 0
    findings = read_logs(files)
    show_findings(findings, console, json_out)
    return 1 if not exit_zero and any(f.outcome == "violation" for f in findings) else 0


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        tmp.unlink(missing_ok=True)
