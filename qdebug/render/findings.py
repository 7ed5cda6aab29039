"""Findings as Rich text: the one list every report (and the TUI's batch screen) shows them in."""

from __future__ import annotations

from dataclasses import dataclass

from rich.panel import Panel
from rich.text import Text

from qdebug.vocab import FindingKind, Severity

from .data_text import data

RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}  # the order they are listed in: what went wrong first
NAMED = 3  # requests a folded line names before "… N more"
# what alike info findings of a kind say together (else the first one's words, its request left out)
SAID_TOGETHER = {FindingKind.DETOKENIZATION: "the server's answers have the model's words and differ only in surrounding "
                 "whitespace: a difference of detokenisation, not of the model"}


@dataclass(frozen=True)
class Listed:
    """One line of the findings list: a finding, or alike info findings folded into one with their count."""

    severity: str
    kind: str
    message: str


def listed(findings) -> list[Listed]:
    """Findings in the order a reader needs them (errors, warnings, then info, each as found), info findings that say
    the same thing of different requests folded into one line with their count and the requests (`--json` keeps every
    one). Info findings of one kind that say different things (each burst's batching, each cache read) stay lines."""
    groups: dict[tuple[str, str], list] = {}
    for f in findings:
        if f.severity == Severity.INFO:
            groups.setdefault(_said(f), []).append(f)
    out, done = [], set()
    for f in sorted(findings, key=lambda f: RANK.get(f.severity, 1)):
        alike = groups.get(_said(f), []) if f.severity == Severity.INFO else []
        if len(alike) < 2:
            out.append(Listed(f.severity, f.kind, f.message))
            continue
        if _said(f) in done:
            continue
        done.add(_said(f))
        ids = list(dict.fromkeys(g.request_id for g in alike if g.request_id))
        who = ", ".join(ids[:NAMED]) + (f", … {len(ids) - NAMED} more" if len(ids) > NAMED else "")
        out.append(Listed(f.severity, f"{f.kind} ×{len(alike)}", f"{'requests ' + who + ': ' if ids else ''}{_said(f)[1]}"))
    return out


def _said(f) -> tuple[str, str]:
    """(kind, what the finding says of its request, without naming it): alike findings say the same."""
    return f.kind, SAID_TOGETHER.get(f.kind) or _without_request(f.message, f.request_id)


def _without_request(message: str, rid: str | None) -> str:
    head = f"request {rid}: "
    return message[len(head):] if rid and message.startswith(head) else message


def findings_text(findings, empty: str = "all checks passed") -> Text:
    """One `[severity] kind: message` line per finding (errors in red, the rest yellow; info findings of one kind folded
    into one line with their count: `listed`); `empty` in green when none."""
    if not findings:
        return data(empty, "green")
    lines = Text()
    for f in listed(findings):  # a finding's message quotes what it saw (ids, evidence, a server's text): data, never markup
        lines.append(data(f"[{f.severity}] {f.kind}: ", "bold red" if f.severity == Severity.ERROR else "yellow"))
        lines.append(data(f.message))
        lines.append("\n")
    lines.rstrip()
    return lines


def findings_panel(findings) -> Panel:
    """Findings as a list in a panel (a green 'all checks passed' when empty)."""
    return Panel(findings_text(findings), title="findings", expand=False)
