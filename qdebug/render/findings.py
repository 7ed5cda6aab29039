"""Findings as Rich text: the one list every report (and the TUI's batch screen) shows them in."""

from __future__ import annotations

from rich.panel import Panel
from rich.text import Text

from qdebug.vocab import Severity


def findings_text(findings, empty: str = "all checks passed") -> Text:
    """One `[severity] kind: message` line per finding (errors in red, the rest yellow); `empty` in green when none."""
    if not findings:
        return Text(empty, style="green")
    lines = Text()
    for f in findings:
        lines.append(f"[{f.severity}] {f.kind}: ", style="bold red" if f.severity == Severity.ERROR else "yellow")
        lines.append(f"{f.message}\n")
    lines.rstrip()
    return lines


def findings_panel(findings) -> Panel:
    """Findings as a list in a panel (a green 'all checks passed' when empty)."""
    return Panel(findings_text(findings), title="findings", expand=False)
