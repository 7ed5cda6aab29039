"""What screens ask of qdebug's app, as a type: `AppServices` (tui/app.py implements it, checked there) and
`QDebugAppType`, an App that has them, which a screen's `app` is typed as.

Screens never import the app (it imports them: a circle); they import this module, for type checking only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App

    from qdebug.model.choice import ModelChoice


class AppServices(Protocol):
    """The app's own attributes and actions that its screens use."""

    pixels: str | None  # "sixel" / "tgp" where the terminal shows pixels, else None (half blocks)
    model_spec: ModelChoice | None  # the model a live request screen loads
    keymap_path: Path
    user_keymap: dict[str, str]  # binding id → keys, from the user's keymap
    keymap_error: str | None  # why the user's keymap was refused

    def show_help(self, context: str | None = None) -> None:
        """Keys and commands over the current screen."""

    def show_picture(self, report: Any) -> None:
        """The offset timeline of `report` as a picture."""

    def quit_app(self) -> None:
        """Cancel the runs, then exit."""


if TYPE_CHECKING:

    class QDebugAppType(App[Any], AppServices):
        """An App with qdebug's services: the type of a screen's `app` (Textual's `getters.app`)."""
