"""The one registry of `--inject` presets: which names `replay`, `serve` and `diff` accept, their help, what each plants.

A preset is one `Preset` subclass in one file of `qdebug/replay/presets/`, decorated with `@register`; the package is
listed on first use, so adding the file is the whole change. Nothing here imports torch (`qdebug --help` builds its
`--inject` help from this module); a preset imports torch and its fault classes inside `planter`.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from qdebug.errors import InputError

if TYPE_CHECKING:
    from qdebug.model.load import LoadedModel

NONE = "none"  # the spec that plants nothing (replay's and serve's default)


class Command(StrEnum):
    """The commands whose `--inject` reads this registry."""

    REPLAY = "replay"
    SERVE = "serve"
    DIFF = "diff"


@dataclass(frozen=True)
class PlantContext:
    """What a preset may use to plant its fault in one run: the command, its loaded model, the seed, serve's wave window."""

    command: Command
    loaded: LoadedModel | None = None  # the LoadedModel every request of the run uses
    seed: int = 0
    wave_window: float = 0.5


class Planter:
    """One run's fault: asked per wave of concurrent requests (replay) and per request. The base plants nothing."""

    def wave(self, items: list[tuple[str, object]], start: int) -> None:
        """A wave of (request id, Request) about to run together; `start` is its first request's place in the burst."""

    def faults(self, request_id: str, request, events) -> tuple:
        """The `trace.protocols.Fault`s for one request; `events(kind, **fields)` is its event sink (None in diff)."""
        return ()

    def taps(self) -> tuple[tuple, tuple]:
        """(attention taps, linear-attention taps) for each request of the run (diff)."""
        return (), ()

    def failed(self, request_id: str, request) -> None:
        """A request failed before its fault ran: release whatever turn it held (the others must not wait for it)."""

    def cancel(self) -> None:
        """The run is interrupted: wake whatever waits on the fault."""


class Preset:
    """One `--inject` preset: its name (and argument), one line of help, the commands that accept it, what it plants."""

    name: ClassVar[str]
    help: ClassVar[str]  # one line, shown in `--help` of every command that accepts it
    commands: ClassVar[frozenset[Command]]
    arg: ClassVar[str | None] = None  # the argument's placeholder (`K` in `offset-shift:K`); None: takes none
    arg_help: ClassVar[str] = ""  # what the argument must be, for the error (`K an integer`)
    input_path: ClassVar[str | None] = None  # diff: the input path side B takes (a `trace.runner.INPUT_PATHS` member)

    @classmethod
    def syntax(cls) -> str:
        """How a user writes it: `name` or `name:ARG`."""
        return cls.name if cls.arg is None else f"{cls.name}:{cls.arg}"

    def parse_arg(self, value: str) -> int:
        """The argument's value; ValueError when it is not one (the default: any integer)."""
        return int(value)

    def label(self, arg: int | None) -> str:
        """A few words naming what this spec breaks (diff's B label)."""
        return self.syntax() if arg is None else f"{self.name}:{arg}"

    def check_model(self, arg: int | None, model: str) -> None:
        """Refuse an argument the model cannot take, from its config alone (before any weights load)."""

    def planter(self, arg: int | None, ctx: PlantContext) -> Planter:
        """The run's Planter (the base: one that plants nothing, for a preset that only changes `input_path`)."""
        return Planter()


@dataclass(frozen=True)
class Injection:
    """A parsed `--inject` spec: its preset and argument."""

    spec: str
    preset: Preset
    arg: int | None = None

    @property
    def name(self) -> str:
        """The preset's name."""
        return self.preset.name

    @property
    def label(self) -> str:
        """A few words naming what it breaks."""
        return self.preset.label(self.arg)

    def check_model(self, model: str) -> None:
        """Refuse an argument the model cannot take, from its config alone."""
        self.preset.check_model(self.arg, model)

    def planter(self, ctx: PlantContext) -> Planter:
        """The run's Planter for this spec."""
        return self.preset.planter(self.arg, ctx)


_PRESETS: dict[str, Preset] = {}
_loaded = False


def register(cls: type[Preset]) -> type[Preset]:
    """Class decorator: add a preset to the registry (a name may be registered once)."""
    if cls.name in _PRESETS and type(_PRESETS[cls.name]) is not cls:
        raise ValueError(f"--inject preset {cls.name} registered twice ({type(_PRESETS[cls.name]).__name__}, {cls.__name__})")
    _PRESETS[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a preset (tests that register one of their own)."""
    _PRESETS.pop(name, None)


def presets(command: Command | None = None) -> list[Preset]:
    """Every registered preset (those `command` accepts, when given), in name order."""
    _load()
    return [p for _, p in sorted(_PRESETS.items()) if command is None or command in p.commands]


def inject_help(command: Command) -> str:
    """The `--inject` help of `command`: each preset it accepts, with its one line."""
    lead = {Command.REPLAY: "A fault to plant", Command.SERVE: "Serve with a fault", Command.DIFF: "Break B on purpose"}[command]
    listed = [f"{p.syntax()} ({p.help})" for p in presets(command)]
    return f"{lead}: " + " | ".join(listed if command == Command.DIFF else [NONE, *listed]) + "."


def parse_inject(spec: str | None, command: Command) -> Injection | None:
    """The Injection `spec` names for `command`, None for `none`; a one-line InputError naming what is accepted."""
    if spec is None or spec == NONE:
        return None
    name, colon, value = spec.partition(":")
    accepted = presets(command)
    preset = _PRESETS.get(name)
    if preset is None:
        raise InputError(f"--inject {spec}: unknown preset; {command} accepts {_choices(accepted)}")
    if command not in preset.commands:
        where = " and ".join(sorted(preset.commands))
        raise InputError(f"--inject {spec}: `qdebug {command}` cannot plant {name} (it is a {where} fault); {command} accepts {_choices(accepted)}")
    if preset.arg is None:
        if colon:
            raise InputError(f"--inject {spec}: {name} takes no argument (expected {preset.syntax()})")
        return Injection(spec, preset)
    try:
        if not colon:
            raise ValueError(value)
        return Injection(spec, preset, preset.parse_arg(value))
    except ValueError:
        raise InputError(f"--inject {spec}: expected {preset.syntax()} with {preset.arg_help}") from None


def _choices(accepted: list[Preset]) -> str:
    names = [NONE, *(p.syntax() for p in accepted)]
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]


def _load() -> None:
    """Import every module of `qdebug/replay/presets/` once: each registers its preset."""
    global _loaded
    if _loaded:
        return
    from . import presets as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    _loaded = True
