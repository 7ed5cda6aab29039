"""The app of `qdebug watch` (live): qdebug's app whose first screen is the WatchScreen; traces opened from it go through
the app's file router onto request screens, as any trace does."""

from __future__ import annotations

from .app import QDebugApp


class WatchApp(QDebugApp):
    """QDebugApp starting on the watch view (no model: traces only)."""

    def __init__(self, args, interval: float) -> None:
        super().__init__(source=str(args.source))
        self.watch_args, self.interval = args, interval

    def get_default_screen(self):
        """The watch view."""
        self.main_screen = self.files.watch_screen(self.watch_args, self.interval)
        return self.main_screen


def build_watch_app(args, interval: float = 2.0) -> WatchApp:
    """The live view of `args.source` (a commands.watch.WatchArgs), read every `interval` seconds."""
    return WatchApp(args, interval)
