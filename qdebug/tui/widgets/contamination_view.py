"""ContaminationView: the contamination matrix (whose token stream × whose isolated encode rows) as a small heatmap."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.colors import scale_color
from qdebug.render.data_text import data
from qdebug.shown import shown
from qdebug.vocab import Verdict

CELL = 4  # a cell: " .93": the space keeps neighbouring values apart without colour
SHORT_ID = 4  # ids shortened to their last characters (the row number before them names the row too)


def _layout(n: int, name_width: int, width: int | None) -> tuple[int, int]:
    """(id width, columns per block) so that every column shows within `width`: ids shorten first, then the matrix
    continues in another block of columns below (never a dropped column)."""
    if width is None:
        return name_width, n
    for ids in (name_width, min(name_width, SHORT_ID)):
        if ids + 4 + CELL * n <= width:
            return ids, n
    ids = min(name_width, SHORT_ID)
    fit = max(1, (width - ids - 4) // CELL)
    blocks = -(-n // fit)
    return ids, -(-n // blocks)  # blocks of even size: 7 + 7 rather than 13 + 1


def _short(rid: str, width: int) -> str:
    """An id in `width` characters, hidden characters escaped: its end, which is where ids of one burst differ (req-01, req-02)."""
    rid = shown(rid, None)
    return rid if len(rid) <= width else "…" + rid[-(width - 1):]


def matrix_text(report, width: int | None = None) -> Text:
    """Cells coloured by cosine (scaled to the matrix's range), columns numbered like the rows; a row wholly
    filled by another request's rows is flagged. `width`: the panel's; every column is drawn within it."""
    ids, matrix = report.contamination_ids, report.contamination
    if not matrix and report.cells is not None:
        return cells_text(report)
    if not ids or not matrix:
        return Text("no contamination matrix in this report", style="dim")
    values = [v for row in matrix for v in row if v is not None]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    cell = CELL
    name_width, per_block = _layout(len(ids), min(10, max(len(shown(i, None)) for i in ids)), width)
    donors = {}
    for rid in ids:
        outcome = report.outcome(rid)
        if outcome is not None and outcome.verdict in (Verdict.CONTAMINATED, Verdict.DESYNC):
            donors[rid] = outcome.donor
    out = Text()
    for first in range(0, len(ids), per_block):
        cols = range(first, min(len(ids), first + per_block))
        if first:
            out.append("\n")
        prefix = name_width + 4  # "NN id " before the first cell
        label = "stream ╲ encode"
        if first == 0 and len(label) > prefix:  # on its own line: squeezed into the prefix it would shift the numbers
            out.append(label + "\n", style="dim")
        out.append(f"{label if first == 0 and len(label) <= prefix else '':>{prefix}}", style="dim")
        for j in cols:
            out.append(f"{j + 1:^{cell}d}", style="bold")
        out.append("\n")
        for i, (rid, row) in enumerate(zip(ids, matrix)):
            out.append(data(f"{i + 1:>2} {_short(rid, name_width):>{name_width}} ", "bold"))
            for j in cols:
                v = row[j]
                if v is None:
                    out.append(f"{'–':^{cell}}", style="dim")
                    continue
                r, g, b = scale_color((v - lo) / span)
                ink = "black" if (r * 299 + g * 587 + b * 114) / 1000 > 128 else "white"
                text = "1.0" if v >= 0.9995 else f"{v:.2f}".lstrip("0")
                style = "bold white on red" if ids[j] == donors.get(rid) else f"{ink} on rgb({r},{g},{b})"
                out.append(f"{text:^{cell}}", style=style)
            out.append("\n")
    out.append("cosine; column j = request j's isolated encoder rows; red cell = donor", style="dim")
    for i, rid in enumerate(ids):
        donor = donors.get(rid)
        if donor and report.outcome(rid).verdict == Verdict.CONTAMINATED:
            out.append("\n")
            out.append(data(f"{i + 1} {rid} ◀ {donor}'s rows", "bold red"))
        elif donor:
            out.append("\n")
            out.append(data(f"{i + 1} {rid} ◀ a mix, partly {donor}'s rows", "bold yellow"))
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def cells_text(report, limit: int = 200) -> Text:
    """A log's sparse contamination: one line per contaminated request, its donor and the line that shows it."""
    cells = report.contamination_cells()
    if not cells:
        return Text("no request received another request's visual rows", style="green")
    out = Text(f"{len(cells):,} request(s) received another request's rows\n", style="bold")
    for cell in cells[:limit]:
        out.append(data(f"{cell['request_id']} ◀ {cell['donor']}'s rows", "bold red"))
        out.append(data(f"  {cell['evidence']}", "dim"))
        out.append("\n")
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
        return matrix_text(self.report, self.size.width or None)
