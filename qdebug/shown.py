"""Untrusted text (from a capture, a log, a server or a trace) made safe to show: every character that is not
visible text (controls such as ESC and NUL, bidi overrides such as U+202E, other format, private and unassigned
characters, line and paragraph separators) written as its Python escape, and the length capped.

It is the one rule for showing data: render/ wraps the result in `rich.text.Text` (never markup), and plain-text
outputs (log lines, one-line errors) use it as it is.
"""

from __future__ import annotations

import unicodedata

HIDDEN = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))  # the categories that draw nothing, or move the cursor
DEFAULT_LIMIT = 2000  # characters one shown string keeps before it is cut


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{code:02x}")
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: object, limit: int | None = DEFAULT_LIMIT, *, newlines: bool = False) -> str:
    """`text` as a string safe to print: hidden characters escaped (`\\x1b`, `\\u202e`), newlines kept only when
    `newlines`, and at most `limit` characters of it shown (then `… (N more characters)`); None: no cap."""
    raw = text if isinstance(text, str) else str(text)
    cut = 0
    if limit is not None and len(raw) > limit:
        raw, cut = raw[:limit], len(raw) - limit
    if raw.isprintable() and not cut:  # the common case: nothing to escape (isprintable is False for every HIDDEN char)
        return raw
    out = "".join(ch if (ch == "\n" and newlines) or unicodedata.category(ch) not in HIDDEN else _escaped(ch) for ch in raw)
    return f"{out}… ({cut:,} more characters)" if cut else out
