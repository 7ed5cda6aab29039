"""A request's verdict as every requests table writes it (the CLI's, the TUI's): `verdict (error) @stage [label]`."""

from __future__ import annotations

from rich.text import Text

from .data_text import data
from .palette import verdict_style


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def verdict_text(r) -> Text:
    """The verdict, its error cut short, the first divergent stage behind it (an endpoint replay with engine traces) and
    what an injected fault said about itself (labels, never evidence); the error and the labels are data."""
    verdict = data(r.verdict, verdict_style(r.verdict))
    if r.error:
        verdict.append_text(data(f" ({_short(r.error, 48)})", "dim"))
    if getattr(r, "stage", None):
        verdict.append_text(data(f" @{r.stage}", "bold"))
    for label in getattr(r, "injected", None) or []:
        verdict.append_text(data(f" [{_short(label, 40)}]", "dim italic"))
    return verdict
