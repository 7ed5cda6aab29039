"""The request screen's keys: its bindings (a keymap names them by id) and one action per key, each handing the work
to the controller it concerns. Textual looks actions up by name on the screen, so they live on the screen's base."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.screen import Screen

from .widgets.command_bar import CommandBar
from .widgets.stage_detail import StageDetail
from .widgets.stage_list import StageList

if TYPE_CHECKING:
    from textual import getters

    from .app_type import QDebugAppType
    from .controllers.cursor import Cursor
    from .controllers.documents import DocController
    from .controllers.replay import ReplayController
    from .controllers.run import RunController
    from .state import Selection


class RequestKeys(Screen):
    """Bindings and actions of RequestScreen (tui/screens/request.py), which makes the controllers they call."""

    if TYPE_CHECKING:  # qdebug's app (tui/app_type.py)
        app = getters.app(QDebugAppType)

    sel: Selection
    runs: RunController
    replays: ReplayController
    cursor: Cursor
    documents: DocController

    BINDINGS = [
        Binding("down", "stage(1)", "next stage in the list", show=False, id="stage-down"),
        Binding("up", "stage(-1)", "previous stage in the list", show=False, id="stage-up"),
        Binding("n", "next", "next stage", id="next"),
        Binding("c", "continue", "continue", id="continue"),
        Binding("b", "breakpoint", "breakpoint", id="breakpoint"),
        Binding("g", "generate", "+1 token", id="generate"),
        Binding("r", "rerun", "rerun", id="rerun"),
        Binding("left_square_bracket", "layer(-1)", "layer-", id="layer-prev"),
        Binding("right_square_bracket", "layer(1)", "layer+", id="layer-next"),
        Binding("h", "head", "head", id="head"),
        Binding("left", "query(-1)", "query ←", show=False, id="query-prev"),
        Binding("right", "query(1)", "query →", show=False, id="query-next"),
        Binding("shift+left", "token(-1)", "token ←", show=False, id="token-prev"),
        Binding("shift+right", "token(1)", "token →", show=False, id="token-next"),
        Binding("i", "image", "next image", show=False, id="image"),
        Binding("shift+down", "detail(3)", "scroll detail", show=False, id="detail-down"),
        Binding("shift+up", "detail(-3)", "scroll detail", show=False, id="detail-up"),
        Binding("t", "toggle_reference", "replayed/reference", id="reference"),
        Binding("colon", "command", ":cmd", id="command"),
        Binding("question_mark,f1", "help", "help", id="help"),
        Binding("escape", "back", "back", show=False, id="back"),
        Binding("q", "quit", "quit", id="quit"),
    ]

    # the cursor (tui/controllers/cursor.py) --------------------------------------------------
    def action_stage(self, delta: int) -> None:
        """Move the stage cursor and redraw the panels in the same handler (one frame per key)."""
        self.cursor.stage(delta)

    def action_layer(self, delta: int) -> None:
        """Heatmap layer: mean → 0 → … → N-1 (and back)."""
        self.cursor.layer(delta)

    def action_head(self) -> None:
        """Heatmap head: mean → 0 → 1 … → mean."""
        self.cursor.head()

    def action_query(self, delta: int) -> None:
        """Move the query token (text prompt tokens, then one per generated step)."""
        self.cursor.query(delta)

    def action_token(self, delta: int) -> None:
        """Move the cursor one token (image tokens included)."""
        self.cursor.token(delta)

    def action_image(self) -> None:
        """Show the next image's heatmap."""
        self.cursor.image()

    def action_toggle_reference(self) -> None:
        """Show the request's next run: replayed ↔ reference; an endpoint's engine in the burst → engine alone → local model."""
        self.documents.toggle()

    # the screen's own widgets ------------------------------------------------------------------
    def action_detail(self, delta: int) -> None:
        """Scroll the stage detail."""
        self.query_one(StageDetail).scroll_lines(delta)

    def action_command(self) -> None:
        """Focus the command bar (at once: keys typed behind `:` go there)."""
        self.set_focus(self.query_one(CommandBar))

    def action_help(self) -> None:
        """Keys and commands, starting with what the focused panel shows."""
        focused = self.focused
        self.app.show_help(focused.id if focused is not None else None)

    def action_back(self) -> None:
        """Cancel a replay in progress; else back to the batch screen (when opened from one), else to the stage list."""
        if self.replays.cancel():
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:
            self.query_one(StageList).focus()

    def action_quit(self) -> None:
        """Leave qdebug (the app cancels every run first)."""
        self.app.quit_app()

    # keys that drive the live run (tui/controllers/run.py) -------------------------------------
    def action_next(self) -> None:
        """Run to the next stage boundary."""
        self.runs.next()

    def action_continue(self) -> None:
        """Run to the next breakpoint or the end."""
        self.runs.continue_()

    def action_breakpoint(self) -> None:
        """Toggle a breakpoint on the selected stage."""
        if self.sel.stage is not None:
            self.runs.set_breakpoint(self.sel.stage, self.sel.stage not in self.runs.breakpoints)

    def action_generate(self) -> None:
        """One more token: continue to the next step.K, or rerun with one more token when finished."""
        self.runs.generate()

    def action_rerun(self) -> None:
        """Run the last request again (cancelling the one in progress)."""
        self.runs.rerun()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide `t` unless there is a reference to toggle to."""
        if action == "toggle_reference":
            return self.documents.paired
        return True
