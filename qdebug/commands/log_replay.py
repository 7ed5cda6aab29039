"""`qdebug replay LOG...`: index runtime logs (cached), with progress and Ctrl-C, filter, and report."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.errors import InputError

if TYPE_CHECKING:
    from rich.progress import Progress


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
    """Whether the inputs are runtime logs or log indexes (folders; several files always are; one file by --format
    or detection)."""
    from qdebug.replay.formats.detect import FORMATS, detect_format

    if any(p.is_dir() for p in files) and fmt in (None, "runtime-log"):
        return True  # index folders (`--index-only --out DIR`), read as one

    if fmt is not None and fmt not in FORMATS:
        return False  # read_batch names the bad --format
    if len(files) > 1:
        if fmt == "capture":
            raise InputError("several files are runtime logs (rotated or merged); replay one capture at a time")
        return True
    return (fmt or detect_format(files[0])) == "runtime-log"


# What a runtime log's lines are recognised by, named when a file holds none of them (a false pass otherwise).
LOOKED_FOR = ("a JSONL capture (a chat-completions body per line) or runtime-log lines: VisualEncoder::encode_image "
              "start, VisualEncoder::write_buffer wrote / overwrote, TokenSynchronizer::stitch, Generator::decode "
              "first_token, TokenStreamDesyncWarning, VisualEmbeddingShapeMismatchError, CrossAttentionIndexOutOfBounds "
              "(README: Runtime log)")


def no_event_text(lines: int, what: str) -> str:
    """The line saying a log holds no recognised event, and what was looked for."""
    return f"no recognised event in the {lines:,} line(s) of {what} (looked for {LOOKED_FOR})"


def _refuse_eventless(index, interrupted: bool, shown: str) -> None:
    """No recognised event in logs read to their end: ReplayFormatError (exit 2), since a report of no event would
    say "no contamination" about a file qdebug could not read at all."""
    from qdebug.errors import ReplayFormatError

    if not interrupted and not index.meta.get("events"):
        lines = int(index.meta.get("total_lines") or 0)
        index.close()
        raise ReplayFormatError(no_event_text(lines, shown))


def run_log_replay(files: list[Path], flt, console=None, use_cache: bool = True):
    """Index (or reopen) the logs with a progress bar on a terminal; Ctrl-C stops and reports what was read.

    Folders are log indexes (one per host, from `--index-only`), read as one without re-reading any log.
    """
    from qdebug.analysis.log_report import report_from_index

    shown = str(files[0])[:200] + (f" (+{len(files) - 1} more)" if len(files) > 1 else "")
    if any(p.is_dir() for p in files):
        from qdebug.replay.log_index import LogIndex

        if not all(p.is_dir() for p in files):
            raise InputError("give either runtime logs or index folders, not both (expected index each host's logs "
                             "with --index-only, then read the folders together)")
        index = LogIndex.open_folders(files)
        _refuse_eventless(index, False, shown)
        return report_from_index(index, flt, False)
    from qdebug.analysis.log_index_build import drop_cached, open_log_index
    from qdebug.errors import ReplayFormatError

    with _progress(files, console) as (on_progress, stats):
        index, reused, interrupted = open_log_index(files, on_progress, use_cache, stats)
    _refuse_eventless(index, interrupted, shown)
    try:
        return report_from_index(index, flt, interrupted)
    except ReplayFormatError:  # a cached Parquet file whose footer reads but whose pages do not: a cache miss after all
        if not reused:
            raise
        index.close()
        drop_cached(index.path)
    with _progress(files, console) as (on_progress, stats):
        index, _reused, interrupted = open_log_index(files, on_progress, use_cache, stats)
    return report_from_index(index, flt, interrupted)


def run_index_only(files: list[Path], out: Path, host: str | None, console=None):
    """`--index-only`: index the logs into the folder out (for shipping); (the index or None, whether a signal cut it,
    the scan's stats)."""
    from qdebug.analysis.log_index_build import index_logs

    with _progress(files, console) as (on_progress, stats):
        index, interrupted = index_logs(files, out, host, on_progress, stats)
    return index, interrupted, stats


class _progress:
    """(progress callback or None, ScanStats): a Rich bar on a terminal showing bytes, lines/s and the disk's share."""

    def __init__(self, files: list[Path], console):
        from qdebug.replay.formats.log_scan import ScanStats

        self.files, self.console, self.stats = files, console, ScanStats()
        self.bar: Progress | None = None

    def __enter__(self):
        if self.console is None or not self.console.is_terminal:
            return None, self.stats
        import time

        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (TextColumn("reading {task.description}"), BarColumn(), DownloadColumn(), TextColumn("{task.fields[rate]}"),
                   TimeRemainingColumn())
        bar = self.bar = Progress(*columns, console=self.console, transient=True)
        bar.__enter__()
        files, stats = self.files, self.stats
        task = bar.add_task(files[0].name + (f" (+{len(files) - 1})" if len(files) > 1 else ""), total=None, rate="")
        start = time.perf_counter()

        def on_progress(done: int, total: int, lines: int) -> None:
            bar.update(task, completed=done, total=total, rate=rate_text(lines, done, time.perf_counter() - start, stats.read_seconds))

        return on_progress, stats

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)


def rate_text(lines: int, done: int, seconds: float, read_seconds: float) -> str:
    """"1.9 M lines/s · 62% of disk read rate": the disk's rate is the bytes/s of the scan's own raw read calls
    (time inside read() alone), so the share says how much of the time reading could take the indexing takes."""
    if seconds <= 0 or lines <= 0:
        return ""
    text = f"{lines / seconds / 1e6:.1f} M lines/s"
    if read_seconds > 0 and done > 0:
        text += f" · {min(1.0, read_seconds / seconds):.0%} of disk read rate"
    return text


def index_only_command(files: list[Path], index_only: bool, out: Path | None, host: str | None, status) -> int:
    """`qdebug replay --index-only LOG... --out DIR [--host NAME]`: write the index, say where; the exit code."""
    if not index_only or out is None:
        raise InputError("--out and --host go with --index-only (expected `qdebug replay --index-only LOG... --out DIR`)")
    if host is not None and (not host.strip() or "/" in host or len(host) > 200):
        raise InputError(f"--host {host!r}: not a host name (expected a name without '/', as ids are shown host/id)")
    if any(p.is_dir() for p in files):
        raise InputError("--index-only reads runtime logs (expected log files, not index folders)")
    from qdebug.render.data_text import data
    from qdebug.signals import interrupt_exit_code

    index, interrupted, stats = run_index_only(files, out, host, status)
    if interrupted:
        code = interrupt_exit_code()
        status.print(data(f"{'terminated (SIGTERM)' if code == 143 else 'interrupted'} after {stats.total_lines:,} lines: "
                          f"no index written to {out} (what was there is as it was)", limit=None))
        return code
    meta = index.meta
    status.print(data(f"indexed {meta['total_lines']:,} lines ({meta['events']:,} events, {index.request_count():,} requests) "
                      f"of host {meta['host']} into {out}", limit=None))
    if not meta["events"]:
        status.print(data(no_event_text(meta["total_lines"], "its logs")))
    index.close()
    return 0
