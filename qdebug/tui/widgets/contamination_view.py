"""ContaminationView: the contamination matrix (whose token stream × whose isolated encode rows) as a small heatmap."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.colors import scale_color
from qdebug.vocab import Verdict

CELL = 4


def matrix_text(report) -> Text:
    """Cells coloured by cosine (scaled to the matrix's range), columns numbered like the rows; a row wholly
    filled by another request's rows is flagged."""
    ids, matrix = report.contamination_ids, report.contamination
    if not matrix and report.cells is not None:
        return cells_text(report)
    if not ids or not matrix:
        return Text("no contamination matrix in this report", style="dim")
    values = [v for row in matrix for v in row if v is not None]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    name_width = min(10, max(len(i) for i in ids))
    out = Text(f"{'stream ╲ encode':>{name_width + 4}} ", style="dim")
    for j, _ in enumerate(ids):
        out.append(f"{j + 1:^{CELL}}", style="bold")
    out.append("\n")
    notes = []
    for i, (rid, row) in enumerate(zip(ids, matrix)):
        outcome = report.outcome(rid)
        donor = outcome.donor if outcome is not None and outcome.verdict in (Verdict.CONTAMINATED, Verdict.DESYNC) else None
        out.append(f"{i + 1:>2} {rid[:name_width]:>{name_width}} ", style="bold")
        for d, v in zip(ids, row):
            if v is None:
                out.append(f"{'–':^{CELL}}", style="dim")
                continue
            r, g, b = scale_color((v - lo) / span)
            ink = "black" if (r * 299 + g * 587 + b * 114) / 1000 > 128 else "white"
            text = "1.0" if v >= 0.9995 else f"{v:.2f}".lstrip("0")
            style = "bold white on red" if d == donor else f"{ink} on rgb({r},{g},{b})"
            out.append(f"{text:^{CELL}}", style=style)
        out.append("\n")
        if donor and outcome.verdict == Verdict.CONTAMINATED:
            notes.append((f"{i + 1} {rid} ◀ {donor}'s rows", "bold red"))
        elif donor:
            notes.append((f"{i + 1} {rid} ◀ a mix, partly {donor}'s rows", "bold yellow"))
    out.append("cosine; column j = request j's isolated encoder rows; red cell = donor", style="dim")
    for note, style in notes:
        out.append("\n" + note, style=style)
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def cells_text(report, limit: int = 200) -> Text:
    """A log's sparse contamination: one line per contaminated request, its donor and the line that shows it."""
    cells = report.contamination_cells()
    if not cells:
        return Text("no request received another request's visual rows", style="green")
    out = Text(f"{len(cells):,} request(s) received another request's rows\n", style="bold")
    for cell in cells[:limit]:
        out.append(f"{cell['request_id']} ◀ {cell['donor']}'s rows", style="bold red")
        out.append(f"  {cell['evidence']}\n", style="dim")
    if len(cells) > limit:
        out.append(f"… {len(cells) - limit:,} more (qdebug replay --json for all)", style="dim")
    out.rstrip()
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


class ContaminationView(Widget):
    """The matrix panel; set `report` to redraw."""

    report = reactive(None, always_update=True, layout=True)

    def render(self):
        """Draw the matrix."""
        if self.report is None:
            return Text("")
        return matrix_text(self.report)
