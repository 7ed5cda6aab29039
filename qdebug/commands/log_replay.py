"""`qdebug replay LOG...`: index runtime logs (cached), with progress and Ctrl-C, filter, and report."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from qdebug.errors import InputError


def parse_time(option: str, value: str | None) -> float | None:
    """An ISO time (a bare date or time without zone means UTC) as epoch seconds; one-line error otherwise."""
    if value is None:
        return None
    text = value.strip()
    try:
        when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" and text else text)
    except ValueError:
        raise InputError(f"{option} {value!r}: not an ISO time (expected e.g. 2024-07-12T14:23:07Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


def make_filter(since: str | None, until: str | None, request: str | None, kinds: list[str] | None):
    """The EventFilter the options ask for (kinds: overwrite, desync, shape, oob, or full kind names)."""
    from qdebug.replay.log_index import KIND_ALIASES, EventFilter
    from qdebug.vocab import EVENT_KINDS

    chosen = []
    for item in kinds or []:
        for name in filter(None, (k.strip() for k in item.split(","))):
            kind = KIND_ALIASES.get(name, name)
            if kind not in EVENT_KINDS:
                raise InputError(f"--kind {name}: unknown event kind (expected one of: {', '.join(KIND_ALIASES)})")
            chosen.append(kind)
    flt = EventFilter(parse_time("--since", since), parse_time("--until", until), request, tuple(chosen))
    if flt.since is not None and flt.until is not None and flt.until < flt.since:
        raise InputError(f"--until {until} is before --since {since} (expected a time window)")
    return flt


def is_runtime_log(files: list[Path], fmt: str | None) -> bool:
    """Whether the inputs are runtime logs (several files always are; one file by --format or detection)."""
    from qdebug.replay.formats.detect import FORMATS, detect_format

    if fmt is not None and fmt not in FORMATS:
        return False  # read_batch names the bad --format
    if len(files) > 1:
        if fmt == "capture":
            raise InputError("several files are runtime logs (rotated or merged); replay one capture at a time")
        return True
    return (fmt or detect_format(files[0])) == "runtime-log"


def run_log_replay(files: list[Path], flt, console=None, use_cache: bool = True):
    """Index (or reopen) the logs with a progress bar on a terminal; Ctrl-C stops and reports what was read."""
    from qdebug.analysis.log_index_build import open_log_index
    from qdebug.analysis.log_report import report_from_index

    if console is not None and console.is_terminal:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        columns = (TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TextColumn("{task.fields[lines]:,} lines"), TimeRemainingColumn())
        with Progress(*columns, console=console, transient=True) as bar:
            task = bar.add_task(files[0].name + (f" (+{len(files) - 1})" if len(files) > 1 else ""), total=None, lines=0)

            def on_progress(done: int, total: int, lines: int) -> None:
                bar.update(task, completed=done, total=total, lines=lines)

            index, _reused, interrupted = open_log_index(files, on_progress, use_cache)
    else:
        index, _reused, interrupted = open_log_index(files, None, use_cache)
    if flt.active:
        index.ensure_filter_indexes()
    report = report_from_index(index, flt, interrupted)
    return report
