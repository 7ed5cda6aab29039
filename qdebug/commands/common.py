"""Shared pieces of the commands: consoles, progress on terminals only, JSON output."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from qdebug.shown import shown

if TYPE_CHECKING:
    from qdebug.findings import Finding


def consoles(json_to_stdout: bool):
    """(report console, status console): the report goes to stderr when stdout carries JSON, terminal or not.

    Rich colours only a terminal, so a redirected report is plain text. Neither reads markup or emoji codes: a `str`
    printed is shown as it is (what is styled on purpose is a `Text`), so a request id of `[/x]` is never a tag.
    """
    from rich.console import Console

    report = Console(stderr=json_to_stdout, highlight=False, markup=False, emoji=False)
    if not report.is_terminal and not os.environ.get("COLUMNS", "").isdigit():  # piped or captured: wide enough that tables
        report = Console(stderr=json_to_stdout, highlight=False, markup=False, emoji=False, width=160)  # don't fold every word (COLUMNS, when set, wins)
    return report, Console(stderr=True, highlight=False, markup=False, emoji=False)


def say_wrote(console, *targets) -> None:
    """`wrote PATH` on stderr for each file written (None: not asked for; `-`: stdout, not a file)."""
    for target in targets:
        if target is None or str(target) == "-":
            continue
        if console is None:
            print(f"wrote {shown(target, None)}", file=sys.stderr)
        else:
            console.print(f"wrote {shown(target, None)}", markup=False, highlight=False, soft_wrap=True)  # one line, however long the path


@contextmanager
def progress(console, description: str):
    """A Rich spinner on a terminal; silent otherwise."""
    from qdebug.render.data_text import data

    if console.is_terminal:
        with console.status(data(description)):
            yield
    else:
        yield


def quiet_transformers() -> None:
    """Silence transformers' progress bars and warnings (qdebug reports what matters itself)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()


def emit_json(data: dict, target: str | None) -> None:
    """Write JSON to a path (atomically) or to stdout for `-`."""
    if target is None:
        return
    from qdebug.strict_json import dumps

    text = dumps(data, indent=2, ensure_ascii=False)
    if target == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    from qdebug.render.files import write_text_atomically

    write_text_atomically(Path(target), text + "\n")


@contextmanager
def loading(spec: str):
    """Around model loading: Ctrl-C or SIGTERM here says so, and that no output was written."""
    from qdebug.errors import Interrupted
    from qdebug.signals import Terminated

    try:
        yield
    except Terminated:
        raise Interrupted(f"terminated (SIGTERM) while loading the model {spec}; no output was written", 143) from None
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted while loading the model {spec}; no output was written (existing files are untouched)") from None


@contextmanager
def two_phase_progress(console, first: tuple[str, int], second: tuple[str, int], count_word: str):
    """Yields on_progress(phase, request_id, ok) for a reference phase then a run phase, drawn as two bars.

    Requests whose `ok` is False are counted in the second bar's note (`count_word: N`). Without a terminal
    it yields None: the runner then reports no progress.
    """
    if console is None or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[note]}"), console=console, transient=True) as bar:
        ref = bar.add_task(first[0], total=first[1], note="")
        run = bar.add_task(second[0], total=second[1], note=f"{count_word}: 0")
        bad = [0]

        def on_progress(phase: str, rid: str, ok: bool) -> None:
            if phase == "reference":
                bar.advance(ref)
                return
            bad[0] += not ok
            bar.update(run, advance=1, note=f"{count_word}: {bad[0]}")

        yield on_progress


def exit_status(findings: Iterable[Finding], problem: bool = False) -> int:
    """The exit status of every command that reports findings: 1 for a problem (any ERROR finding, or the command's own judgement), else 0.

    The one exception is what another system said: a capture's `observed` answers are production's story, reported
    beside this run's and never its failure (README, `qdebug replay`).
    """
    from qdebug.vocab import FindingKind, Severity

    reported_only = {FindingKind.OBSERVED_CONTAMINATION, FindingKind.OBSERVED_DIVERGED}
    return int(problem or any(f.severity == Severity.ERROR and f.kind not in reported_only for f in findings))
