"""Pixels in the terminal: which graphics protocol textual-image found (Sixel, Kitty's TGP), if any.

textual-image asks the terminal when it is imported, which must happen before the app takes the terminal
over: `detect()` is called by `build_app`. QDEBUG_PIXELS=sixel|tgp|off overrides the detection.
"""

from __future__ import annotations

import os
from typing import Literal

_protocol: str | None | Literal[False] = False  # False: not detected yet


def _terminal_may_show_pixels() -> bool:
    """Cheap hints that the terminal speaks Sixel or Kitty graphics (importing textual-image and querying the
    terminal costs ~300 ms of the first frame, so it is only done where it can pay off)."""
    import sys

    if not sys.stdout.isatty():
        return False
    term, program = os.environ.get("TERM", ""), os.environ.get("TERM_PROGRAM", "")
    return bool(
        os.environ.get("KITTY_WINDOW_ID")
        or term in ("xterm-kitty", "foot", "foot-extra", "mlterm", "yaft-256color", "contour")
        or "sixel" in term
        or program in ("WezTerm", "ghostty", "iTerm.app", "mintty", "contour")
    )


def detect() -> str | None:
    """"sixel", "tgp" or None (half blocks): the environment's choice, else what textual-image detected."""
    global _protocol
    forced = os.environ.get("QDEBUG_PIXELS", "").strip().lower()
    if forced in ("sixel", "tgp"):
        return forced
    if forced in ("off", "none", "halfblocks"):
        return None
    if _protocol is False and not _terminal_may_show_pixels():
        _protocol = None
    if _protocol is False:
        try:
            from textual_image.renderable import Image
            from textual_image.renderable.sixel import Image as Sixel
            from textual_image.renderable.tgp import Image as TGP

            _protocol = "sixel" if Image is Sixel else "tgp" if Image is TGP else None
        except Exception:  # no textual-image, or a terminal it cannot query: half blocks
            _protocol = None
    return _protocol


def image_widget(protocol: str, **kwargs):
    """A textual-image widget for `protocol`."""
    from textual_image.widget import SixelImage, TGPImage

    return (SixelImage if protocol == "sixel" else TGPImage)(**kwargs)
