"""The qdebug Textual app and `build_app`, the one factory the CLI and the tests both call."""

from __future__ import annotations

import gc

# Importing Textual and the screens makes some 100k objects, and the collections they set off on the way (dozens,
# ~8 ms on 2 cores) find nothing to free: collection is off while this module's imports run, and what they made is
# frozen (moved to the permanent generation, which later full collections skip) before it is turned back on.
_collecting = gc.isenabled()
gc.disable()
try:
    import time
    from dataclasses import dataclass
    from pathlib import Path
    from typing import TYPE_CHECKING

    from textual import on, work
    from textual.app import App
    from textual.binding import Binding
    from textual.message import Message

    from qdebug.errors import describe
    from qdebug.model.choice import ModelChoice

    from .files import FileRouter
    from .screens.request import RequestScreen  # the first screen of a live run or a trace; its bindings are what a keymap names
    from .session import PendingRequest
finally:
    gc.freeze()
    if _collecting:
        gc.enable()

# Screens are imported where they are first shown (help, the timeline picture, a report's batch screen): the first
# frame waits only for the screen it shows (benchmarks/tui.py holds it to 1.25× a minimal Textual app's).
if TYPE_CHECKING:
    from .app_type import AppServices
    from .screens.batch import BatchScreen


_startup_frozen = False


def freeze_startup_objects() -> None:
    """Once a process, when the app is built: move to the permanent generation what was made since this module's
    imports were frozen (the command line's objects, a trace loaded before the app), so the full collections that
    the first frame's allocations trigger do not walk them (one fell in most first frames: ~15 ms of ~50 before
    either freeze, benchmarks/tui.py), nor do later ones between key presses."""
    global _startup_frozen
    if not _startup_frozen:
        _startup_frozen = True
        gc.freeze()


class QDebugApp(App):
    """The interactive debugger: a request screen (live or saved trace) or a batch screen (replay report).

    Screens never push each other: files and documents go through `files` (a FileRouter), help and the timeline
    picture through `show_help` / `show_picture`."""

    @dataclass
    class ModelLoaded(Message):
        """The model finished loading in its worker."""

        loaded: object

    @dataclass
    class ModelLoadFailed(Message):
        """The model could not be loaded (a one-line reason)."""

        error: str

    CSS_PATH = "app.tcss"
    TITLE = "qdebug"
    BINDINGS = [Binding("ctrl+q", "quit", "quit", show=False, priority=True)]

    def __init__(self, *, trace=None, report=None, model_spec: ModelChoice | None = None, pending: PendingRequest | None = None,
                 loaded=None, source: str = "", before_load=None):
        freeze_startup_objects()
        super().__init__()
        self.trace, self.report, self.model_spec, self.pending, self.source = trace, report, model_spec, pending, source
        self.loaded = loaded
        self.before_load = before_load  # a check that may refuse the model (too big for the device), run in the loader
        self.started_at = time.perf_counter()
        self.first_frame_at: float | None = None  # set when the first frame is on screen (benchmarks read it)
        self.main_screen: RequestScreen | BatchScreen | None = None
        self.files = FileRouter(self)
        from .pixels import detect

        self.pixels = detect()  # "sixel" / "tgp" where the terminal shows pixels, else None (half blocks)
        from .keymap import keymap_path, load_keymap

        self.keymap_path = keymap_path()
        known = {b.id: b.description for b in RequestScreen.BINDINGS if isinstance(b, Binding) and b.id}
        defaults = {b.id: b.key for b in RequestScreen.BINDINGS if isinstance(b, Binding) and b.id}
        self.user_keymap, self.keymap_error = load_keymap(self.keymap_path, known, defaults)
        if self.user_keymap:
            self.set_keymap(self.user_keymap)

    def get_default_screen(self):
        """The first screen: the batch screen for a report, else the request screen."""
        self.main_screen = self.files.first_screen(trace=self.trace, report=self.report, source=self.source, pending=self.pending)
        return self.main_screen

    def show_help(self, context: str | None = None) -> None:
        """Keys and commands over the current screen (`context`: the focused panel's id, explained first)."""
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen(context))

    def show_picture(self, report) -> None:
        """The offset timeline of `report` as a picture."""
        from .screens.timeline_picture import TimelinePictureScreen

        self.push_screen(TimelinePictureScreen(report))

    def get_system_commands(self, screen):
        """The palette (ctrl+p): every `:` verb and key of the screen, then Textual's own (theme, screenshot…)."""
        from .command_palette import palette_commands

        yield from palette_commands(screen)
        yield from super().get_system_commands(screen)

    def on_mount(self) -> None:
        """Hand over an already loaded model (a fresh load starts once the first frame is on screen)."""
        if self.model_spec is not None and self.loaded is not None:
            self.call_after_refresh(self.post_message, self.ModelLoaded(self.loaded))

    def on_ready(self) -> None:
        """The first frame is on screen: now load the model (importing torch in a worker thread holds the
        interpreter for a while; started earlier it delays the first frame by hundreds of ms)."""
        self.first_frame_at = time.perf_counter()
        if isinstance(self.main_screen, RequestScreen):  # its secondary panels wait for the first frame
            self.main_screen.first_frame_shown()
        if self.model_spec is not None and self.loaded is None:
            self._load_model()

    @work(thread=True, exclusive=True, group="model")
    def _load_model(self) -> None:
        """Load the model off the UI thread; report with ModelLoaded / ModelLoadFailed."""
        choice = self.model_spec
        if choice is None:  # on_ready starts the loader only when there is a model to load
            return
        try:
            from qdebug.commands.common import quiet_transformers

            quiet_transformers()
            if self.before_load is not None:  # here, not before the app: it imports torch (seconds before a first frame)
                self.before_load()
            loaded = choice.load()
        except Exception as exc:  # QDebugError carries a one-line message; anything else is named
            self.post_message(self.ModelLoadFailed(describe(exc)))
            return
        self.post_message(self.ModelLoaded(loaded))

    @on(ModelLoaded)
    def _hand_model_down(self, event: ModelLoaded) -> None:
        """Hand the model down to the live request screen."""
        self.loaded = event.loaded
        if isinstance(self.main_screen, RequestScreen):
            self.main_screen.model_ready(event.loaded)

    @on(ModelLoadFailed)
    def _say_model_failed(self, event: ModelLoadFailed) -> None:
        """Say why, inline; the app stays usable for saved traces."""
        if isinstance(self.main_screen, RequestScreen):
            self.main_screen.model_failed(event.error)

    @on(FileRouter.Loaded)
    def _show_loaded(self, event: FileRouter.Loaded) -> None:
        """A file worker read a document: the router shows it."""
        self.files.loaded(event)

    @on(FileRouter.Said)
    def _tell_requester(self, event: FileRouter.Said) -> None:
        """A file worker's result or error, for the screen that asked."""
        self.files.said(event)

    def cancel_runs(self, timeout: float = 5.0) -> None:
        """Cancel every live run and wait for its worker thread to end."""
        for screen in [*self.screen_stack, self.main_screen]:
            if isinstance(screen, RequestScreen):
                screen.cancel_all(timeout)

    def quit_app(self) -> None:
        """Cancel the runs (unblocking any paused forward pass), then exit."""
        self.cancel_runs()
        self.exit()

    async def action_quit(self) -> None:
        """Quit (ctrl+q, `q`, `quit`)."""
        self.quit_app()


if TYPE_CHECKING:
    _services: type[AppServices] = QDebugApp  # the app has what its screens ask of it (tui/app_type.py)


def build_app(
    *,
    trace=None,
    report=None,
    model_spec: ModelChoice | None = None,
    image_paths: list[Path] | None = None,
    prompt: str | None = None,
    max_new_tokens: int = 16,
    loaded=None,
    source: str = "",
    before_load=None,
) -> QDebugApp:
    """The app for a saved trace, a replay report, or live runs on `model_spec` (`loaded`: an already loaded model;
    `before_load`: called in the loader worker first, its QDebugError shown inline instead of loading)."""
    if trace is None and report is None and model_spec is None and loaded is None:
        model_spec = ModelChoice()
    if loaded is not None and model_spec is None:
        model_spec = ModelChoice(model=loaded.spec, device=loaded.device, dtype=loaded.dtype, attn_kernel=loaded.attn_kernel)
    pending = PendingRequest([Path(p) for p in image_paths or []], prompt, max_new_tokens)
    return QDebugApp(trace=trace, report=report, model_spec=model_spec if trace is None and report is None else None,
                     pending=pending, loaded=loaded, source=source, before_load=before_load)
