"""Widgets of the qdebug TUI, one per module."""
