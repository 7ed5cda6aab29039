"""Keys typed ahead: Textual hands each key to the widget focused when it arrives, and runs bindings later, so
on a busy machine keys typed right after `:` or Enter reach a widget that is no longer focused. They are passed
on, in order, to the widget that has the focus now."""

from __future__ import annotations

from textual import events


def pass_on(widget, event: events.Key) -> bool:
    """Send `event` on to the focused widget when it is not `widget`; True when it did."""
    focused = widget.screen.focused
    if focused is None or focused is widget:
        return False
    event.prevent_default()
    event.stop()
    widget.app.post_message(events.Key(event.key, event.character))
    return True
