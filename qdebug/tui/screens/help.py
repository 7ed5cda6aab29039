"""HelpScreen: the keys and commands, over the current screen (Escape or q closes it)."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from qdebug.render.data_text import data

from ..command_language import COMMANDS

KEYS = [
    ("", "a live run stops at its start (preprocess), as pdb does: n steps, c runs to the next breakpoint"),
    ("↑/↓", "move through the stages"),
    ("n", "run to the next stage (the forward pass waits at every boundary)"),
    ("c", "continue to the next breakpoint or the end"),
    ("b", "toggle a breakpoint on the selected stage"),
    ("g", "one more token: the next step.K; a run that stopped at its token limit reruns with max_new_tokens + 1; "
          "after the end-of-sequence token there is no next token"),
    ("r", "rerun the request"),
    ("[ / ]", "heatmap layer (mean → 0 → … → N-1)"),
    ("h", "heatmap head (mean → 0 → 1 … → mean)"),
    ("← / →", "query token (text prompt tokens, then generated steps)"),
    ("shift+← / →", "cursor one token (image tokens too)"),
    ("i", "next image"),
    ("t", "replayed / reference trace (a request opened from a replay)"),
    (":", "command bar (↑/↓ history, Tab completes, Esc leaves)"),
    ("Enter", "on the batch screen: open the request"),
    ("Esc", "cancel a replay in progress; back to the batch screen"),
    ("Tab", "next panel (? then explains that panel)"),
    ("? / F1", "this help, starting with the focused panel"),
    ("ctrl+p", "command palette: every command and key, searchable"),
    ("q", "quit"),
]

# What each panel shows and which keys act on it: the first part of the help when the panel has the focus.
PANELS = {
    "stages": ("stages", "The pipeline of the request, in order: preprocess, encode, sync, layer.N, logits, step.K. "
               "▶ marks where a live run is paused (header and panel say the same: `run N · paused at STAGE`), ✓ done, "
               "· pending, ● a breakpoint, ✗ a failed check. ↑/↓ select a stage, b toggles its breakpoint, n runs to "
               "the next stage, c to the next breakpoint, g to the next generated token, r starts the run again."),
    "detail": ("stage", "What the selected stage captured: shapes, statistics, fingerprints and its checks (✓/✗). At "
               "preprocess: the templated prompt, the tokens (each image's placeholder run as <image I: N tokens @start>) "
               "and the spans. shift+↑/↓ or the wheel scroll."),
    "topk": ("top-k", "The next-token distribution at the cursor position (or the step chosen there): bars, "
             "probabilities and entropy. ←/→ move the query token, `topk K` sets the rows."),
    "timeline": ("offsets", "The token stream: text ids coloured by what they are (text, image I, generated), and the "
                 "rows the sync step put there. Visual offset ≠ text offset is a desync (✗). ←/→ query token, "
                 "shift+←/→ one token."),
    "attention": ("attention", "Attention from the query token to each image's merged-patch grid, beside the image; the "
                  "peak cell is outlined. [ / ] layer (mean first), h head, i next image, ←/→ query token. Without "
                  "colour (NO_COLOR) the grid is a character ramp ` .:-=+*#%@`."),
    "command": ("command bar", "Type a command and Enter: it runs and the keys go back to the panels. Tab completes "
                "commands, stages and paths; ↑/↓ walk the history; Esc leaves."),
    "requests": ("requests", "The replayed requests with their verdicts; Enter opens one (replayed vs reference with t)."),
}


def help_table(context: str | None = None, keys: dict[str, str] | None = None) -> Table:
    """The focused panel's help (`context`: its id), then keys, then commands, as one table.

    `keys`: the user's keymap (binding id → keys), so the help names the keys that really act."""
    table = Table(title="qdebug keys and commands", show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    if context in PANELS:
        name, text = PANELS[context]
        table.add_row(data(f"▸ {name}"), data(text), style="bold")
        table.add_row("", "")
    for action, key in (keys or {}).items():  # the user's keymap file: data
        table.add_row(data(key), data(f"your keymap: {action}"))
    for key, what in KEYS:
        table.add_row(data(key), data(what))
    table.add_row("", "")
    for name, (args, what) in COMMANDS.items():
        table.add_row(data(f"{name} {args}".strip()), data(what))
    return table


class HelpScreen(ModalScreen):
    """Keys and commands; any of Escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "close")]

    def __init__(self, context: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.context = context

    def compose(self) -> ComposeResult:
        """The table in a scrollable box."""
        with VerticalScroll(id="help-box"):
            yield Static(help_table(self.context, getattr(self.app, "user_keymap", None)), id="help-text")
