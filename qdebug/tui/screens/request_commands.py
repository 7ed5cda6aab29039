"""The request screen's command handlers (the REPL verbs), and the file work they start in thread workers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual import work

from qdebug.errors import describe

from ..commands import Command, CommandError, export_target, int_arg, int_or_mean, parse
from ..messages import FileLoaded, Notice
from ..state import valid_stage


class RequestCommands:
    """Mixin for RequestScreen: `run_command(line)` parses and dispatches; errors stay inline."""

    def run_command(self, line: str) -> None:
        """Parse and run one command line; a bad one shows an inline error."""
        try:
            cmd = parse(line)
            getattr(self, f"cmd_{cmd.name}")(cmd)
        except CommandError as exc:
            self.say(str(exc), error=True)
        except Exception as exc:  # QDebugError and friends from validation: one line, never a crash
            self.say(describe(exc), error=True)

    # the request -------------------------------------------------------------------
    def cmd_image(self, cmd: Command) -> None:
        if cmd.arg == "clear":
            self.pending.image_paths.clear()
            self.say("the next request has no image")
            return
        from qdebug.trace.request import load_image

        path = Path(cmd.arg).expanduser()
        load_image(path)  # ImageError (one line) for a missing or corrupt file
        self.pending.image_paths.append(path)
        self.say(f"image {len(self.pending.image_paths) - 1}: {path} (`run` to trace)")
        self.refresh_view()

    def cmd_prompt(self, cmd: Command) -> None:
        self.pending.prompt = cmd.arg
        self.say(f"prompt: {cmd.arg!r} (`run` to trace)")
        self.refresh_view()

    def cmd_run(self, cmd: Command) -> None:
        self.start_run(self.pending.build())

    def cmd_next(self, cmd: Command) -> None:
        self.action_next()

    def cmd_continue(self, cmd: Command) -> None:
        self.action_continue()

    # breakpoints ----------------------------------------------------------------------
    def _stage_arg(self, cmd: Command) -> str:
        if not valid_stage(cmd.arg, self.num_layers):
            layers = f"layer.0..layer.{self.num_layers - 1}" if self.num_layers else "layer.N"
            raise CommandError(f"{cmd.name} {cmd.arg}: not a stage (expected preprocess, encode, sync, {layers}, logits, step.K or step.*)")
        return cmd.arg

    def cmd_break(self, cmd: Command) -> None:
        self.set_breakpoint(self._stage_arg(cmd), True)

    def cmd_clear(self, cmd: Command) -> None:
        if cmd.arg == "all":
            for stage in list(self.breakpoints):
                self.set_breakpoint(stage, False)
            self.say("all breakpoints cleared")
            return
        self.set_breakpoint(self._stage_arg(cmd), False)

    # what the panels show ------------------------------------------------------------
    def cmd_layer(self, cmd: Command) -> None:
        self.select(layer=int_or_mean(cmd, self.num_layers))

    def cmd_head(self, cmd: Command) -> None:
        self.select(head=int_or_mean(cmd, self.num_heads))

    def cmd_token(self, cmd: Command) -> None:
        if self.doc is None:
            raise CommandError("token: no request on screen yet")
        self.select(pos=int_arg(cmd, self.doc.length))

    def cmd_topk(self, cmd: Command) -> None:
        self.select(topk=int_arg(cmd, None, lower=1))

    # files -------------------------------------------------------------------------------
    def cmd_save(self, cmd: Command) -> None:
        if self.doc is None or not self.doc.complete:
            raise CommandError("save: no finished trace on screen (c runs the request to the end)")
        self._save(self.doc.trace, Path(cmd.arg).expanduser())

    def cmd_open(self, cmd: Command) -> None:
        path = Path(cmd.arg).expanduser()
        if path.suffix not in (".qdt", ".qdr"):
            raise CommandError(f"open {cmd.arg}: expected a .qdt trace or a .qdr replay report")
        if not path.is_file():
            raise CommandError(f"open {cmd.arg}: no such file")
        self.say(f"opening {path}…")
        self._open(path)

    def cmd_export(self, cmd: Command) -> None:
        kind, path = export_target(cmd)
        if kind == "svg":
            self.export_svg(path)
            return
        if self.doc is None or not self.doc.trace.steps:
            raise CommandError("export: no generated tokens on screen to draw")
        step = self.doc.step_chosen_at(self.view().pos)
        steps = [step] if step is not None else list(range(len(self.doc.trace.steps)))
        from ..images import pil_image

        pils = [pil_image(self.doc, i.index) for i in self.doc.trace.images]
        self.say(f"writing {path}…")
        self._export(self.doc.trace, pils, path, steps, self.sel.layer, self.sel.head)

    def export_svg(self, path: Path) -> None:
        """The screen exactly as it is now, as SVG (Textual's screenshot), written atomically."""
        if path.is_dir():
            raise CommandError(f"export svg {path}: is a folder (expected a file name such as screen.svg)")
        if not path.parent.is_dir():
            raise CommandError(f"export svg {path}: folder {path.parent} does not exist")
        svg = self.app.export_screenshot(title=f"qdebug · {self._info_plain or 'request'}")
        from qdebug.atomic import atomic_path

        try:
            with atomic_path(path) as tmp:
                Path(tmp).write_text(svg, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"export svg {path}: {exc.strerror or exc}") from None
        self.say(f"wrote {path} (this screen as SVG)")

    def cmd_replay(self, cmd: Command) -> None:
        try:
            from qdebug.commands.replay import load_or_run_replay
        except ImportError:
            raise CommandError("replay is unavailable in this build (qdebug.commands.replay is missing); `open FILE.qdr` opens a saved report") from None
        path = Path(cmd.arg).expanduser()
        if path.suffix == ".qdr" or not path.is_file():  # a saved report opens at once (a missing file: its one-line error)
            self.say(f"replaying {cmd.arg}…")
            self._replay(load_or_run_replay, cmd.arg)
            return
        self.start_replay(path)

    def cmd_help(self, cmd: Command) -> None:
        self.action_help()

    def cmd_quit(self, cmd: Command) -> None:
        self.app.quit_app()

    # workers: never block the UI, report back with messages ------------------------------
    @work(thread=True, group="files")
    def _save(self, trace, path: Path) -> None:
        from qdebug.trace.schema import save_trace

        try:
            self.post_message(Notice(f"saved {save_trace(trace, path)}"))
        except Exception as exc:
            self.post_message(Notice(f"save {path}: {describe(exc)}", error=True))

    @work(thread=True, group="files")
    def _open(self, path: Path) -> None:
        try:
            if path.suffix == ".qdr":
                from qdebug.replay.report import load_report

                self.post_message(FileLoaded("report", load_report(path), str(path)))
            else:
                from qdebug.trace.schema import load_trace

                self.post_message(FileLoaded("trace", load_trace(path), str(path)))
        except Exception as exc:
            self.post_message(Notice(describe(exc), error=True))

    @work(thread=True, group="files")
    def _export(self, trace, pils, path: Path, steps, layer, head) -> None:
        from qdebug.render.plots import attention_png

        try:
            self.post_message(Notice(f"wrote {attention_png(trace, pils, path, steps=steps, layer=layer, head=head)}"))
        except Exception as exc:
            self.post_message(Notice(f"export {path}: {describe(exc)}", error=True))

    @work(thread=True, group="files")
    def _replay(self, load_or_run_replay, source: str) -> None:
        try:
            self.post_message(FileLoaded("report", load_or_run_replay(source), source))
        except Exception as exc:
            self.post_message(Notice(f"replay {source}: {describe(exc)}", error=True))

    def select(self, **changes) -> None:
        """Change the selection and redraw."""
        self.sel = replace(self.sel, **changes)
        self.refresh_view()
