"""`qdebug replay`: read a capture or runtime log, re-execute captures, and report who got whose visual tokens."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qdebug.model.choice import ModelChoice

if TYPE_CHECKING:
    from qdebug.replay.report import ReplayReport


@dataclass(kw_only=True)
class ReplayArgs(ModelChoice):
    """Everything `qdebug replay` was asked for (the model: `ModelChoice`'s fields)."""

    file: Path
    format: str | None = None
    mode: str = "threads"
    concurrency: int = 4
    inject: str = "none"
    seed: int = 0
    allow_paths: bool = False
    more_files: tuple = ()  # more runtime logs (rotated files), merged in time order
    log_filter: object | None = None  # qdebug.replay.log_index.EventFilter for --since/--until/--request/--kind


def run_replay(
    args: ReplayArgs,
    console=None,
    *,
    loaded=None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[str, str, bool], None] | None = None,
    cancel: threading.Event | None = None,
) -> ReplayReport:
    """Parse, re-execute when there are payloads, analyse; returns a ReplayReport (interrupted ones included).

    The CLI passes a console (progress bars); the TUI passes `loaded` (the model it already holds, else the args'
    model is loaded), `on_total(requests to run)` before loading, `on_progress(phase, request_id, clean)` after each
    request and a `cancel` event (the report then says `interrupted`).
    """
    from qdebug.analysis.replay import report_from_log, report_from_replay
    from qdebug.replay.engine import ReplaySettings, check_settings, replay
    from qdebug.replay.formats.detect import read_batch

    from .log_replay import is_runtime_log, make_filter, run_log_replay

    files = [Path(args.file), *map(Path, args.more_files)]
    if is_runtime_log(files, args.format):  # indexed on disk: any size, cached, filtered
        return run_log_replay(files, args.log_filter or make_filter(None, None, None, None), console)
    batch = read_batch(args.file, args.format, args.allow_paths)
    if batch.kind == "runtime-log":
        return report_from_log(batch)
    settings = ReplaySettings(mode=args.mode, concurrency=args.concurrency, inject=args.inject, seed=args.seed)
    check_settings(settings)
    total = sum(1 for r in batch.requests if r.request is not None)
    if on_total is not None:
        on_total(total)
    if loaded is None:
        from qdebug.commands.common import loading, quiet_transformers

        with loading(args.spec):
            quiet_transformers()
            loaded = args.load()
    if on_progress is not None:
        run = replay(loaded, batch, settings, on_progress, cancel=cancel)
    else:
        from qdebug.commands.common import two_phase_progress

        with two_phase_progress(console, ("isolated references", total), (f"replay ({args.mode}, inject {args.inject})", total),
                                "contaminated so far") as progress:
            run = replay(loaded, batch, settings, progress, cancel=cancel)
    return report_from_replay(batch, run)


def default_replay_args(path: str | Path) -> ReplayArgs:
    """What the TUI replays with: the CLI's defaults (demo model, threads, 4 at a time, no fault), on CPU unless CUDA is there."""
    return ReplayArgs(file=Path(path), device="cpu" if not _cuda() else "auto")


def load_or_run_replay(path: str | Path) -> ReplayReport:
    """For the TUI: open a saved `.qdr` report, or replay a capture / read a log with default settings."""
    from qdebug.replay.report import load_report

    p = Path(path)
    if p.suffix == ".qdr":
        return load_report(p)
    return run_replay(default_replay_args(p))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def found_problems(report: ReplayReport) -> bool:
    """Whether this replay's verdicts found contamination, desync, divergence or errors: `qdebug replay` then exits 1, as
    for any ERROR finding (`commands.common.exit_status`, the rule of every command).

    Request verdicts judge what this replay observed (what production answered, `observed`, has its own findings);
    a log's problem that names no request (a desync warning without an id) counts too.
    """
    from qdebug.vocab import FindingKind, Verdict

    unnamed = {FindingKind.CONTAMINATION, FindingKind.DESYNC, FindingKind.DIVERGED, FindingKind.SHAPE_MISMATCH,
               FindingKind.INDEX_OUT_OF_BOUNDS, FindingKind.REQUEST_ERROR, FindingKind.LOG_SHRANK}
    return (any(r.verdict != Verdict.OK for r in report.requests)
            or any(f.request_id is None and f.kind in unnamed for f in report.findings))


def prompt_after_sigterm(report: ReplayReport) -> ReplayReport:
    """The report to write after SIGTERM: a runtime log's report holds only its in-memory pages (written in moments),
    not everything streamed from the index (minutes for a big log, past a `docker stop` grace period)."""
    import copy

    if getattr(report, "log_index", None) is None:
        return report
    paged = copy.copy(report)
    paged.log_index = None
    return paged


def write_replay_outputs(report, emit_log: Path | None, timeline_png: Path | None, save: Path | None) -> None:
    """Write the runtime-log-format events, the timeline PNG and the saved report (each atomically)."""
    if emit_log is not None:
        from qdebug.replay.formats.log_writer import write_runtime_log

        write_runtime_log(report.events, emit_log)
    if timeline_png is not None:
        from qdebug.render.plots import timeline_png as draw

        draw(report, timeline_png)
    if save is not None:
        from qdebug.replay.report import save_report

        save_report(report, save)
