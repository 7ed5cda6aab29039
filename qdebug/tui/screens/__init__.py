"""Screens of the qdebug TUI: the request screen and the batch (replay) screen."""
