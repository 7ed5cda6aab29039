"""PrerenderedLines: lines rendered off the UI thread (a worker's Rich render), shown with Textual's line API, so a
frame draws only the visible lines however long the text (a page of a large log's timeline)."""

from __future__ import annotations

from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


def render_lines(renderable, width: int) -> list[list[Segment]]:
    """`renderable` as lines of segments at `width` cells (any thread: a console of its own, colours kept)."""
    from rich.console import Console

    console = Console(width=width, color_system="truecolor", force_terminal=True, legacy_windows=False, no_color=False, markup=False, emoji=False)
    return console.render_lines(renderable, console.options.update(width=width), pad=False)


class PrerenderedLines(ScrollView, can_focus=True):
    """Scrolls through lines given by `show(lines, width)`; renders only what is on screen."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.lines: list[Strip] = []

    def show(self, lines: list[list[Segment]], width: int) -> None:
        """Show these lines from the top."""
        self.lines = [Strip(line) for line in lines]
        self.virtual_size = Size(width, len(self.lines))
        self.scroll_home(animate=False)
        self.refresh()

    @property
    def text(self) -> str:
        """The lines as plain text (what a reader sees)."""
        return "\n".join(strip.text.rstrip() for strip in self.lines)

    def render_line(self, y: int) -> Strip:
        """Line `y` of the view, cut to the scroll position."""
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        if index >= len(self.lines):
            return Strip.blank(self.size.width, self.rich_style)
        return self.lines[index].crop_extend(scroll_x, scroll_x + self.size.width, self.rich_style)
