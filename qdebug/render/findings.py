"""Findings as Rich text: the one list every report (and the TUI's batch screen) shows them in."""

from __future__ import annotations

from rich.panel import Panel
from rich.text import Text

from qdebug.vocab import Severity

from .data_text import data


def findings_text(findings, empty: str = "all checks passed") -> Text:
    """One `[severity] kind: message` line per finding (errors in red, the rest yellow); `empty` in green when none."""
    if not findings:
        return data(empty, "green")
    lines = Text()
    for f in findings:  # a finding's message quotes what it saw (ids, evidence, a server's text): data, never markup
        lines.append(data(f"[{f.severity}] {f.kind}: ", "bold red" if f.severity == Severity.ERROR else "yellow"))
        lines.append(data(f.message))
        lines.append("\n")
    lines.rstrip()
    return lines


def findings_panel(findings) -> Panel:
    """Findings as a list in a panel (a green 'all checks passed' when empty)."""
    return Panel(findings_text(findings), title="findings", expand=False)
