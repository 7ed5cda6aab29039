"""HelpScreen: the keys and commands, over the current screen (Escape or q closes it)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..commands import COMMANDS

KEYS = [
    ("↑/↓", "move through the stages"),
    ("n", "run to the next stage (the forward pass waits at every boundary)"),
    ("c", "continue to the next breakpoint or the end"),
    ("b", "toggle a breakpoint on the selected stage"),
    ("g", "one more token (next step.K; after the end, rerun with max_new_tokens + 1)"),
    ("r", "rerun the request"),
    ("[ / ]", "heatmap layer (mean → 0 → … → N-1)"),
    ("h", "heatmap head (mean → 0 → 1 … → mean)"),
    ("← / →", "query token (text prompt tokens, then generated steps)"),
    ("shift+← / →", "cursor one token (image tokens too)"),
    ("i", "next image"),
    ("t", "replayed / reference trace (a request opened from a replay)"),
    (":", "command bar (↑/↓ history, Tab completes, Esc leaves)"),
    ("Enter", "on the batch screen: open the request"),
    ("Esc", "back to the batch screen"),
    ("q", "quit"),
]


def help_table() -> Table:
    """Keys, then commands, as one table."""
    table = Table(title="qdebug keys and commands", show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for key, what in KEYS:
        table.add_row(key, what)
    table.add_row("", "")
    for name, (args, what) in COMMANDS.items():
        table.add_row(f"{name} {args}".strip(), what)
    return table


class HelpScreen(ModalScreen):
    """Keys and commands; any of Escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        """The table in a scrollable box."""
        with VerticalScroll(id="help-box"):
            yield Static(help_table())
