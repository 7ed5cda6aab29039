"""ContaminationView: the contamination matrix (whose token stream × whose isolated encode rows) as a small heatmap."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.colors import scale_color

CELL = 7


def matrix_text(report) -> Text:
    """Cells coloured by cosine (scaled to the matrix's range); a row whose best match is another request is flagged."""
    ids, matrix = report.contamination_ids, report.contamination
    if not ids or not matrix:
        return Text("no contamination matrix in this report", style="dim")
    values = [v for row in matrix for v in row if v is not None]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    out = Text("stream ╲ encode ", style="dim")
    for cid in ids:
        out.append(f"{cid:^{CELL}}", style="bold")
    out.append("\n")
    for rid, row in zip(ids, matrix):
        out.append(f"{rid:>15} ", style="bold")
        for v in row:
            if v is None:
                out.append(f"{'–':^{CELL}}", style="dim")
                continue
            r, g, b = scale_color((v - lo) / span)
            ink = "black" if (r * 299 + g * 587 + b * 114) / 1000 > 128 else "white"
            out.append(f"{v:^{CELL}.3f}", style=f"{ink} on rgb({r},{g},{b})")
        best = max(range(len(row)), key=lambda j: row[j] if row[j] is not None else float("-inf"))
        own = ids.index(rid) if rid in ids else None
        if own is not None and best != own and row[best] is not None and row[own] is not None and row[best] > row[own]:
            out.append(f" ◀ {ids[best]}'s rows", style="bold red")
        out.append("\n")
    out.append(f"cosine similarity, colour from {lo:.3f} to {hi:.3f}", style="dim")
    return out


class ContaminationView(Widget):
    """The matrix panel; set `report` to redraw."""

    report = reactive(None, always_update=True, layout=True)

    def render(self):
        """Draw the matrix."""
        if self.report is None:
            return Text("")
        return matrix_text(self.report)
