"""ContaminationView: a replay report's matrix (whose stream × whose encoder rows; an endpoint's: whose answer × whose
answer alone) as a small heatmap, in the words of the CLI's table."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.analysis.matrix_words import matrix_words
from qdebug.render.colors import scale_color
from qdebug.render.data_text import data
from qdebug.shown import shown
from qdebug.render.landed import donor_cell
from qdebug.render.verdict_cell import verdict_text
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
    """Cells coloured by value (scaled to the matrix's range), columns numbered like the rows, with the title, corner and legend
    the CLI's table uses for this report's matrix (analysis.matrix_words: an endpoint's answers, a replay's cosines, a
    log's flags); the requests it names as receiving another's rows or answer listed below. `width`: the panel's;
    every column is drawn within it."""
    ids, matrix = report.contamination_ids, report.contamination
    if not matrix and report.cells is not None:
        return cells_text(report)
    if not ids or not matrix:
        return Text("no contamination matrix in this report", style="dim")
    words = matrix_words(report)
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
    out = data(words.title + "\n", "bold", newlines=True)  # the CLI table's title
    for first in range(0, len(ids), per_block):
        cols = range(first, min(len(ids), first + per_block))
        if first:
            out.append("\n")
        prefix = name_width + 4  # "NN id " before the first cell
        label = words.corner
        if first == 0 and len(label) > prefix:  # on its own line: squeezed into the prefix it would shift the numbers
            out.append_text(data(label + "\n", "dim", newlines=True))
        out.append_text(data(f"{label if first == 0 and len(label) <= prefix else '':>{prefix}}", "dim"))
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
                # an endpoint's red cell: a share of bursts that answered another request's answer (never a .00)
                red = (i != j and v > 0) if words.answers else ids[j] == donors.get(rid)
                style = "bold white on red" if red else f"{ink} on rgb({r},{g},{b})"
                out.append(f"{text:^{cell}}", style=style)
            out.append("\n")
    out.append_text(data(words.legend, "dim"))
    for line, style in (_answer_lines(report) if words.answers else _row_lines(report, donors)):
        out.append("\n")
        out.append_text(data(line, style))
    out.no_wrap, out.overflow = True, "ellipsis"
    return out


def _row_lines(report, donors: dict) -> list[tuple[str, str]]:
    """A replay's or a log's: whose rows each contaminated (or mixed) request's stream held."""
    lines = []
    for i, rid in enumerate(report.contamination_ids):
        donor = donors.get(rid)
        if donor and report.outcome(rid).verdict == Verdict.CONTAMINATED:
            lines.append((f"{i + 1} {rid} ◀ {donor}'s rows", "bold red"))
        elif donor:
            lines.append((f"{i + 1} {rid} ◀ a mix, partly {donor}'s rows", "bold yellow"))
    return lines


def _answer_lines(report) -> list[tuple[str, str]]:
    """An endpoint replay's: each request whose verdict names a donor, in the CLI table's words (its donor cell, its
    verdict with the stage), and how often it answered that donor's answer (the matrix's cell, which may be none: the
    engine's traces can show a donor's rows that never changed the answer)."""
    ids, matrix = report.contamination_ids, report.contamination
    lines = []
    for i, rid in enumerate(ids):
        r = report.outcome(rid)
        who = donor_cell(r) if r is not None else ""
        if not who:
            continue
        line = f"{i + 1} {rid} ◀ {who}: {verdict_text(r).plain}"
        if r.donor in ids and matrix[i][ids.index(r.donor)] is not None:
            share = matrix[i][ids.index(r.donor)]
            line += f"; answered {r.donor}'s answer in {share:.0%} of bursts"
        lines.append((line, "bold red"))
    return lines


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
