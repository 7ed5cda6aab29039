"""CommandController: the request screen's command-bar verbs (`image`, `run`, `break`, `layer`, `open`, `export`…);
`run(line)` parses and dispatches, and a bad line is an inline error, never a crash."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from qdebug.errors import describe
from qdebug.vocab import layer_stage

from ..command_language import Command, CommandError, export_target, int_arg, int_or_mean, parse
from ..state import valid_stage
from .cursor import CursorHost
from .replay import ReplayController
from .run import RunController

if TYPE_CHECKING:
    from ..routing import FileRouter


class CommandHost(CursorHost, Protocol):
    """What the command verbs need from the screen they act on: what the cursor needs (`layer`, `head`, `token` and
    `topk` move the selection as keys do), and these."""

    def say(self, text: str, error: bool = False) -> None:
        """Show a line in the message bar."""

    def refresh_view(self) -> None:
        """Push the current state down to the widgets."""

    def action_help(self) -> None:
        """Open the help."""

    def action_quit(self) -> None:
        """Leave qdebug."""


@dataclass
class CommandController:
    """The verbs: each `cmd_NAME(cmd)` acts through the screen (`host`), its runs, its replays and the file router;
    `screenshot()` is the screen exactly as it is now, as SVG."""

    host: CommandHost
    runs: RunController
    replays: ReplayController
    files: FileRouter
    screenshot: Callable[[], str]

    def run(self, line: str) -> None:
        """Parse and run one command line; a bad one shows an inline error."""
        try:
            cmd = parse(line)
            getattr(self, f"cmd_{cmd.name}")(cmd)
        except CommandError as exc:
            self.host.say(str(exc), error=True)
        except Exception as exc:  # QDebugError and friends from validation: one line, never a crash
            self.host.say(describe(exc), error=True)

    # the request -------------------------------------------------------------------
    def cmd_image(self, cmd: Command) -> None:
        pending = self.runs.pending
        if cmd.arg == "clear":
            pending.image_paths.clear()
            self.host.say("the next request has no image")
            return
        from qdebug.trace.request import load_image

        path = Path(cmd.arg).expanduser()
        load_image(path)  # ImageError (one line) for a missing or corrupt file
        pending.image_paths.append(path)
        self.host.say(f"image {len(pending.image_paths) - 1}: {path} (`run` to trace)")
        self.host.refresh_view()

    def cmd_prompt(self, cmd: Command) -> None:
        self.runs.pending.prompt = cmd.arg
        self.host.say(f"prompt: {cmd.arg!r} (`run` to trace)")
        self.host.refresh_view()

    def cmd_run(self, cmd: Command) -> None:
        self.runs.start(self.runs.pending.build())

    def cmd_next(self, cmd: Command) -> None:
        self.runs.next()

    def cmd_continue(self, cmd: Command) -> None:
        self.runs.continue_()

    # breakpoints ----------------------------------------------------------------------
    def _stage_arg(self, cmd: Command) -> str:
        layers = self.host.num_layers
        if not valid_stage(cmd.arg, layers):
            shown = f"{layer_stage(0)}..{layer_stage(layers - 1)}" if layers else "layer.N"
            raise CommandError(f"{cmd.name} {cmd.arg}: not a stage (expected preprocess, encode, sync, {shown}, logits, step.K or step.*)")
        return cmd.arg

    def cmd_break(self, cmd: Command) -> None:
        self.runs.set_breakpoint(self._stage_arg(cmd), True)

    def cmd_clear(self, cmd: Command) -> None:
        if cmd.arg == "all":
            for stage in list(self.runs.breakpoints):
                self.runs.set_breakpoint(stage, False)
            self.host.say("all breakpoints cleared")
            return
        self.runs.set_breakpoint(self._stage_arg(cmd), False)

    # what the panels show ------------------------------------------------------------
    def cmd_layer(self, cmd: Command) -> None:
        self.host.select(layer=int_or_mean(cmd, self.host.num_layers))

    def cmd_head(self, cmd: Command) -> None:
        self.host.select(head=int_or_mean(cmd, self.host.num_heads))

    def cmd_token(self, cmd: Command) -> None:
        if self.host.doc is None:
            raise CommandError("token: no request on screen yet")
        self.host.select(pos=int_arg(cmd, self.host.doc.length))

    def cmd_topk(self, cmd: Command) -> None:
        self.host.select(topk=int_arg(cmd, None, lower=1))

    # files -------------------------------------------------------------------------------
    def cmd_save(self, cmd: Command) -> None:
        doc = self.host.doc
        if doc is None or not doc.complete:
            raise CommandError("save: no finished trace on screen (c runs the request to the end)")
        path = Path(cmd.arg).expanduser()

        def save():
            from qdebug.trace.schema import save_trace

            return save_trace(doc.trace, path)

        self.files.write(self.host, save, "saved ", f"save {path}: ")

    def cmd_open(self, cmd: Command) -> None:
        path = Path(cmd.arg).expanduser()
        if path.suffix not in (".qdt", ".qdr"):
            raise CommandError(f"open {cmd.arg}: expected a .qdt trace or a .qdr replay report")
        if not path.is_file():
            raise CommandError(f"open {cmd.arg}: no such file")
        self.host.say(f"opening {path}…")
        self.files.open(self.host, path, str(path))

    def cmd_export(self, cmd: Command) -> None:
        kind, path = export_target(cmd)
        if kind == "svg":
            self.export_svg(path)
            return
        doc, sel = self.host.doc, self.host.sel
        if doc is None or not doc.trace.steps:
            raise CommandError("export: no generated tokens on screen to draw")
        step = doc.step_chosen_at(self.host.view().pos_on(doc))
        steps = [step] if step is not None else list(range(len(doc.trace.steps)))
        from ..images import pil_image

        pils = [pil_image(doc, i.index) for i in doc.trace.images]
        self.host.say(f"writing {path}…")

        def draw():
            from qdebug.render.attention_pngs import attention_png  # matplotlib: in the worker, not on the UI thread

            return attention_png(doc.trace, pils, path, steps=steps, layer=sel.layer, head=sel.head)

        self.files.write(self.host, draw, "wrote ", f"export {path}: ")

    def export_svg(self, path: Path) -> None:
        """The screen exactly as it is now, as SVG (Textual's screenshot), written atomically."""
        if path.is_dir():
            raise CommandError(f"export svg {path}: is a folder (expected a file name such as screen.svg)")
        if not path.parent.is_dir():
            raise CommandError(f"export svg {path}: folder {path.parent} does not exist")
        svg = self.screenshot()
        from qdebug.atomic import atomic_path

        try:
            with atomic_path(path) as tmp:
                Path(tmp).write_text(svg, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"export svg {path}: {exc.strerror or exc}") from None
        self.host.say(f"wrote {path} (this screen as SVG)")

    def cmd_replay(self, cmd: Command) -> None:
        try:
            from qdebug.commands.replay import load_or_run_replay
        except ImportError:
            raise CommandError("replay is unavailable in this build (qdebug.commands.replay is missing); `open FILE.qdr` opens a saved report") from None
        path = Path(cmd.arg).expanduser()
        if path.suffix == ".qdr" or not path.is_file():  # a saved report opens at once (a missing file: its one-line error)
            self.host.say(f"replaying {cmd.arg}…")
            self.files.load(self.host, cmd.arg, lambda: load_or_run_replay(cmd.arg), failed=f"replay {cmd.arg}: ")
            return
        self.replays.start(path, self.runs.loaded)

    def cmd_help(self, cmd: Command) -> None:
        self.host.action_help()

    def cmd_quit(self, cmd: Command) -> None:
        self.host.action_quit()
