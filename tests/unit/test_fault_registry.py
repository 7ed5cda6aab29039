"""One registry of `--inject` presets (replay/fault_registry.py): replay, serve and diff parse through it, their `--help`
lists what it holds, and every preset changes what its command runs (the Recorder is handed its fault, tap or path)."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from qdebug.errors import InputError
from qdebug.replay.fault_registry import Command, Planter, Preset, parse_inject, presets, unregister
from qdebug.trace.protocols import FaultBase

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / "sample_data" / "green_triangle_top_right.png"

# The preset a contributor would add: one class, in one file (here, in this test and in the subprocess below).
MARKER_SOURCE = '''
from qdebug.replay.fault_registry import Command, Planter, Preset, register
from qdebug.trace.protocols import FaultBase


class MarkerFault(FaultBase):
    """Changes nothing; the test looks for it among the Recorder's faults."""

    def __init__(self, n):
        self.n = n


class _MarkerPlanter(Planter):
    def __init__(self, n):
        self.n = n

    def faults(self, request_id, request, events):
        return (MarkerFault(self.n),)


@register
class MarkerPreset(Preset):
    name = "test-marker"
    arg = "N"
    arg_help = "N an integer"
    help = "a marker fault planted by the registry test"
    commands = frozenset({Command.REPLAY, Command.SERVE, Command.DIFF})

    def planter(self, arg, ctx):
        return _MarkerPlanter(arg)
'''


@pytest.fixture
def marker():
    """The marker preset registered for one test, and removed after it."""
    namespace: dict = {}
    exec(compile(MARKER_SOURCE, "marker_preset.py", "exec"), namespace)
    yield namespace["MarkerFault"]
    unregister("test-marker")


def test_a_new_preset_is_parsed_by_replay_serve_and_diff(marker):
    from qdebug.commands.diff import DiffArgs, diff_sides
    from qdebug.commands.serve import ServeArgs, check_serve_args
    from qdebug.replay.engine import ReplaySettings, check_settings

    check_settings(ReplaySettings(inject="test-marker:3"))
    check_serve_args(ServeArgs(inject="test-marker:3", port=0))
    _, b = diff_sides(DiffArgs("x.png", "p", inject="test-marker:3"))
    assert b.inject is not None and (b.inject.name, b.inject.arg) == ("test-marker", 3) and "test-marker:3" in b.label
    for command in Command:
        assert "test-marker" in [p.name for p in presets(command)]
        with pytest.raises(InputError, match="expected test-marker:N with N an integer"):
            parse_inject("test-marker:x", command)
    unregister("test-marker")
    with pytest.raises(InputError, match="unknown preset"):
        check_settings(ReplaySettings(inject="test-marker:3"))


def test_a_new_preset_is_listed_in_each_commands_help():
    """`--help` is built when the CLI is imported: a fresh interpreter registers the preset first, then asks."""
    script = MARKER_SOURCE + '''
from typer.testing import CliRunner
from qdebug.cli import app

for command in ("replay", "serve", "diff"):
    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "240", "TERMINAL_WIDTH": "240"}).output
    print(command, " ".join(out.replace("\\u2502", " ").split()))
'''
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    helps = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert set(helps) == {"replay", "serve", "diff"}
    for command, text in helps.items():
        assert "test-marker:N (a marker fault planted by the registry test)" in text, (command, text)
        for preset in presets(Command(command)):
            assert f"{preset.syntax()} ({preset.help})" in text, (command, preset.name)


def test_a_preset_serve_cannot_plant_is_refused_in_one_line():
    from typer.testing import CliRunner

    from qdebug.cli import app

    result = CliRunner().invoke(app, ["serve", "--inject", "head-first:1"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("qdebug: error: --inject head-first:1: `qdebug serve` cannot plant head-first")
    assert result.output.count("\n") == 1 and "shared-visual-buffer" in result.output


def test_every_preset_declares_its_words():
    for preset in presets():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", preset.name) and preset.commands <= set(Command), preset.name
        assert preset.help and "\n" not in preset.help and "[" not in preset.help, preset.name  # one line, no Rich markup
        assert (preset.arg is None) == (not preset.arg_help), preset.name
        assert type(preset).__doc__, preset.name


# --- every preset changes what its command runs -------------------------------------------------------------------


class _Ran(Exception):
    """Raised by the stand-in for trace_request once it has seen what the command hands the Recorder."""


def _spy(seen: list):
    def trace_request(loaded, request, options=None, *, faults=(), taps=(), input_path="ids", **kw):
        seen.append({"faults": tuple(type(f).__name__ for f in faults), "taps": tuple(type(t).__name__ for t in taps),
                     "input_path": input_path})
        assert all(isinstance(f, FaultBase) for f in faults)
        raise _Ran
    return trace_request


def _replay_runs(demo, monkeypatch, spec: str) -> list:
    """What `replay --inject spec` hands the Recorder for each replayed request (the references run untouched)."""
    import qdebug.replay.engine as engine
    from qdebug.replay.batch import Batch, BatchRequest

    seen: list = []
    spy = _spy(seen)
    monkeypatch.setattr(engine, "trace_request", lambda loaded, request, options, **kw: spy(loaded, request, options, **kw) if "listener" in kw else object())
    requests = [BatchRequest(rid, request=SimpleNamespace(images=[object()], videos=[], request_id=rid)) for rid in ("a", "b")]
    run = engine.replay(demo, Batch("test", "capture", requests=requests), engine.ReplaySettings(inject=spec, concurrency=2))
    assert set(run.errors) == {"a", "b"}  # both replays reached trace_request (and stopped there)
    return sorted(seen, key=str)


def _serve_runs(demo, monkeypatch, spec: str) -> list:
    """What `serve --inject spec` hands the Recorder for one chat request with an image."""
    import qdebug.trace.runner as runner
    from qdebug.serve.app import ServeSettings, Tracer

    seen: list = []
    monkeypatch.setattr(runner, "trace_request", _spy(seen))
    url = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode()
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Describe."}]}],
            "max_tokens": 2}
    with pytest.raises(_Ran):
        Tracer(demo, ServeSettings(inject=spec, wave_window=0.01)).answer(body, None)
    return seen


def _diff_runs(demo, monkeypatch, spec: str | None) -> list:
    """What `diff --inject spec` hands the Recorder for side B."""
    import qdebug.trace.runner as runner
    from qdebug.commands.diff import DiffArgs, diff_sides
    from qdebug.commands.diff_side import trace_side
    from qdebug.trace.request import build_request

    seen: list = []
    monkeypatch.setattr(runner, "trace_request", _spy(seen))
    _, b = diff_sides(DiffArgs(str(IMAGE), "Describe the image.", inject=spec))
    with pytest.raises(_Ran):
        trace_side(demo, b, build_request("Describe the image.", [str(IMAGE)], max_new_tokens=2))
    return seen


RUNS = {Command.REPLAY: _replay_runs, Command.SERVE: _serve_runs, Command.DIFF: _diff_runs}
SPECS = {"test-marker": "test-marker:2", "offset-shift": "offset-shift:2", "head-first": "head-first:1"}


def _cases():
    names = [p.name for p in presets()] + ["test-marker"]
    commands = {p.name: p.commands for p in presets()} | {"test-marker": frozenset(Command)}
    return [(name, c) for name in names for c in sorted(commands[name])]


@pytest.mark.parametrize(("name", "command"), _cases(), ids=lambda v: str(v))
def test_every_preset_changes_what_its_command_runs(demo, monkeypatch, marker, name, command):
    """The Recorder is handed something the clean run lacks: a fault, a tap or another input path."""
    spec = SPECS.get(name, name)
    clean = RUNS[command](demo, monkeypatch, None if command == Command.DIFF else "none")
    planted = RUNS[command](demo, monkeypatch, spec)
    assert clean and planted and len(clean) == len(planted)
    assert clean != planted, (spec, command, planted)
    if name == "test-marker":
        assert all("MarkerFault" in run["faults"] for run in planted)


def test_the_registry_holds_the_shipped_presets():
    """The presets the README documents, each accepted where it can act."""
    table = {p.name: set(p.commands) for p in presets()}
    assert table["shared-visual-buffer"] == table["offset-shift"] == {Command.REPLAY, Command.SERVE}
    assert table["temporal-ids-flat"] == set(Command)
    assert table["head-first"] == table["mrope-text-only"] == {Command.DIFF}
    assert parse_inject("offset-shift:-3", Command.SERVE).arg == -3 and parse_inject("none", Command.REPLAY) is None
    assert all(isinstance(p, Preset) for p in presets()) and Planter().faults("a", None, None) == ()
