"""Keys typed ahead: Textual hands each key to the widget focused when it arrives, and runs bindings later, so
on a busy machine keys typed right after `:` or Enter reach a widget that is no longer focused. They are passed
on, in order, to the widget that has the focus now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from textual import events

if TYPE_CHECKING:
    from textual.screen import Screen


class Mounted(Protocol):
    """What FollowsFocus needs of the widget it is mixed into."""

    @property
    def screen(self) -> Screen[Any]:
        """The screen the widget is on."""


def pass_on(widget, event: events.Key) -> bool:
    """Send `event` on to the focused widget when it is not `widget`; True when it did."""
    focused = widget.screen.focused
    if focused is None or focused is widget:
        return False
    event.prevent_default()
    event.stop()
    widget.app.post_message(events.Key(event.key, event.character))
    return True


class FollowsFocus:
    """Mixin for the request screen's focusable panels: `:` focuses the command bar with the key itself, and
    keys that arrive after the focus moved on are passed on in order."""

    async def _on_key(self: Mounted, event: events.Key) -> None:
        if pass_on(self, event):
            return
        if event.key == "colon" and hasattr(self.screen, "action_command"):
            event.prevent_default()
            event.stop()
            self.screen.action_command()
        # anything else: Textual goes on to the base classes' key handlers
