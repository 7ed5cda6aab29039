"""The command bar's language: parsing a line into a Command, argument checks, and Tab completion."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.suggester import Suggester

from qdebug.vocab import EVERY_STEP

# name → (arguments, what it does): the help screen and the error messages read this table.
COMMANDS: dict[str, tuple[str, str]] = {
    "image": ("PATH | clear", "add an image to the next request (clear: none)"),
    "prompt": ("TEXT", "set the next request's prompt"),
    "run": ("", "run the request (pauses at breakpoints)"),
    "next": ("", "run to the next stage"),
    "continue": ("", "run to the next breakpoint or the end"),
    "break": ("STAGE", "set a breakpoint (preprocess, encode, sync, layer.N, logits, step.K, step.*)"),
    "clear": ("STAGE | all", "clear a breakpoint"),
    "layer": ("N | mean", "heatmap layer"),
    "head": ("H | mean", "heatmap head"),
    "token": ("I", "move the cursor to sequence position I"),
    "topk": ("K", "how many top-k rows to show"),
    "save": ("PATH", "save the trace on screen (.qdt)"),
    "open": ("PATH", "open a trace (.qdt) or a replay report (.qdr)"),
    "export": ("png PATH | svg PATH", "png: the attention heatmaps over the image; svg: the screen as you see it (for a bug report)"),
    "replay": ("FILE", "replay a capture or runtime log and show the batch screen"),
    "help": ("", "keys and commands"),
    "quit": ("", "leave qdebug"),
}
ALIASES = {"n": "next", "c": "continue", "cont": "continue", "q": "quit", "exit": "quit", "?": "help", "o": "open", "b": "break"}
NEEDS_ARG = {"image", "prompt", "break", "clear", "layer", "head", "token", "topk", "save", "open", "export", "replay"}
PATH_ARGS = {"image", "save", "open", "replay"}


class CommandError(Exception):
    """A line the command bar cannot run; the message is shown inline."""


@dataclass(frozen=True)
class Command:
    """A parsed command: its canonical name and the rest of the line."""

    name: str
    arg: str = ""


def parse(line: str) -> Command:
    """Split a command line into name and argument; CommandError for unknown commands or a missing argument."""
    line = line.strip().lstrip(":").strip()  # a habit from vim: `:layer 2` works too
    if not line:
        raise CommandError("empty command (try `help`)")
    word, _, rest = line.partition(" ")
    name = ALIASES.get(word.lower(), word.lower())
    if name not in COMMANDS:
        close = [c for c in COMMANDS if c.startswith(name[:2])]
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `help` lists the commands"
        raise CommandError(f"unknown command {word!r}{hint}")
    rest = rest.strip()
    if name in NEEDS_ARG and not rest:
        raise CommandError(f"{name} needs {COMMANDS[name][0]}")
    return Command(name, rest)


def int_or_mean(cmd: Command, upper: int | None) -> int | None:
    """The argument as an index in [0, upper) or None for `mean`; CommandError otherwise."""
    if cmd.arg.lower() == "mean":
        return None
    return int_arg(cmd, upper)


def int_arg(cmd: Command, upper: int | None, lower: int = 0) -> int:
    """The argument as an integer in [lower, upper); CommandError naming the range otherwise."""
    try:
        value = int(cmd.arg)
    except ValueError:
        raise CommandError(f"{cmd.name} {cmd.arg}: expected a number") from None
    if value < lower or (upper is not None and value >= upper):
        top = f"..{upper - 1}" if upper is not None else "+"
        raise CommandError(f"{cmd.name} {cmd.arg}: expected {lower}{top}")
    return value


def export_target(cmd: Command) -> tuple[str, Path]:
    """(kind, PATH) of `export png PATH` or `export svg PATH`."""
    kind, _, path = cmd.arg.partition(" ")
    if kind.lower() not in ("png", "svg") or not path.strip():
        raise CommandError("export needs `png PATH` (heatmaps) or `svg PATH` (this screen)")
    return kind.lower(), Path(path.strip()).expanduser()


def export_path(cmd: Command) -> Path:
    """The PATH of `export png PATH`."""
    kind, path = export_target(cmd)
    if kind != "png":
        raise CommandError("export needs `png PATH`")
    return path


def complete_path(prefix: str) -> str | None:
    """The first existing file or folder that extends `prefix` (folders end in /)."""
    expanded = os.path.expanduser(prefix)
    folder, stem = os.path.split(expanded)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return None
    for name in names:
        if name.startswith(stem) and name != stem and not (name.startswith(".") and not stem.startswith(".")):
            full = os.path.join(folder, name)
            suffix = "/" if os.path.isdir(full) else ""
            return prefix + name[len(stem):] + suffix
    return None


def complete(line: str, stages: list[str]) -> str | None:
    """A completion of the whole line: a command name, a stage name, `mean`, or a path."""
    word, space, rest = line.partition(" ")
    if not space:
        names = [c for c in COMMANDS if c.startswith(word.lower()) and c != word.lower()]
        return names[0] if names and word else None
    name = ALIASES.get(word.lower(), word.lower())
    if name in ("break", "clear"):
        choices = [*stages, EVERY_STEP] + (["all"] if name == "clear" else [])
        match = next((s for s in choices if s.startswith(rest) and s != rest), None)
        return f"{word} {match}" if match else None
    if name in ("layer", "head") and rest and "mean".startswith(rest) and rest != "mean":
        return f"{word} mean"
    if name == "export":
        kind, space2, path = rest.partition(" ")
        if not space2:
            choice = next((k for k in ("png ", "svg ") if k.startswith(rest) and k != rest), None)
            return f"{word} {choice}" if choice and rest else (f"{word} png " if not rest else None)
        done = complete_path(path) if path else None
        return f"{word} {kind} {done}" if done else None
    if name in PATH_ARGS and rest:
        done = complete_path(rest)
        return f"{word} {done}" if done else None
    return None


class CommandSuggester(Suggester):
    """Inline completion for the command bar (accepted with Tab or →)."""

    def __init__(self, stages: Callable[[], list[str]]):
        super().__init__(use_cache=False, case_sensitive=True)
        self._stages = stages

    async def get_suggestion(self, value: str) -> str | None:
        """The completed line, if there is one."""
        return complete(value, self._stages())
