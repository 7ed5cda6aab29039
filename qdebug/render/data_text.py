"""Untrusted strings as Rich text: `qdebug.shown`'s escaping, never markup (a `[/x]` or `[link=...]` shows as typed)."""

from __future__ import annotations

from rich.text import Text

from qdebug.shown import DEFAULT_LIMIT, shown


def data(text: object, style: str = "", limit: int | None = DEFAULT_LIMIT, *, newlines: bool = False) -> Text:
    """`text` (a request id, an answer, evidence, a log field) as a `Text` in `style`: shown, never parsed as markup."""
    return Text(shown(text, limit, newlines=newlines), style=style)
