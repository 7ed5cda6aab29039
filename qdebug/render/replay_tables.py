"""The tables of a replay report (Rich): requests with verdicts, the contamination matrix, the event timeline, cells."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from qdebug.analysis.matrix_words import matrix_words
from qdebug.vocab import EventKind

from .cache_cells import cache_lines, has_cache_column, reused_cell
from .colors import scale_color
from .data_text import data
from .landed import donor_cell, drawn_events, labels_note, measured, offset_cells
from .palette import EVENT_LOOK, kind_look, verdict_style
from .verdict_cell import verdict_text


def _short(text: str | None, width: int = 36) -> str:
    if text is None:
        return "–"
    return text if len(text) <= width else text[: width - 1] + "…"


def requests_table(report) -> Table:
    """One row per request: id, image, reference, replayed, observed and what it says, verdict (this replay's), donor, offsets."""
    if getattr(report, "endpoint", None):
        title = f"{report.kind}: {report.source} · endpoint {report.endpoint} · {report.repeats} burst(s) (replayed = first burst)"
        for said in cache_lines(report):  # what each phase did about the engine's caches, and whose record of reads was read
            title += f" · {said}"
        engine = (getattr(report, "extra", None) or {}).get("engine_traces")
        if engine:  # that the engine's own traces were read, and how many: a clean run says so too
            title += f" · {engine['said']}"
    else:
        title = f"{report.kind}: {report.source}" + (f" · mode {report.mode} · inject {report.inject} · seed {report.seed}" if report.mode else "")
    table = Table(title=data(title))  # the source's name, the endpoint's URL, what the server's traces said: data
    replayed = report.kind == "capture"
    columns = ["id", "image", "reference", "replayed", "observed"] if replayed else ["id"]
    warm = any(getattr(r, "warm_verdict", None) is not None for r in report.requests)
    if warm:  # an endpoint report's warm phase (production caching): its answer beside the cold ones
        columns.insert(4, "warm")
    for col in columns:
        table.add_column(col, overflow="fold")
    if replayed:  # what production's answer says on its own: never the verdict, which is this replay's
        table.add_column("observed verdict", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("donor", overflow="fold")  # one donor, or each burst's: folded rather than pushing the table wider
    for col in ("text@", "visual@"):
        table.add_column(col, no_wrap=True)
    if replayed:  # how far the replayed first token's distribution moved from the reference's
        table.add_column("KL₀", no_wrap=True, justify="right")
    cached = has_cache_column(report)
    if cached:  # what a cache served it: the range behind a cache verdict, or its reads of its own content
        table.add_column("reused", overflow="fold")
    for r in report.requests:
        verdict = verdict_text(r)  # with its stage (endpoint replays with engine traces), as the TUI's table
        cells = ([data(r.id), data(_short(r.image, 18)), data(_short(r.reference)), data(_short(r.replayed)), data(_short(r.observed)),
                  _observed_says(r)] if replayed else [data(r.id)])
        if warm:
            cells.insert(4, data(_short(r.warm_answer)))
        text_at, visual_at = offset_cells(r)
        row = [*cells, verdict, data(donor_cell(r)), data(text_at), data(visual_at)]
        if replayed:
            row.append(Text("–" if r.first_token_kl is None else f"{r.first_token_kl:.2g}"))
        if cached:
            row.append(data(reused_cell(r)))
        table.add_row(*row)
    return table


def _observed_says(r) -> Text:
    """The verdict of production's answer (`observed`) with the request it belongs to, or "–" without one."""
    says = getattr(r, "observed_verdict", None)
    if says is None:
        return Text("–", style="dim")
    return data(says + (f" {r.observed_donor}" if getattr(r, "observed_donor", None) else ""), verdict_style(says))


def matrix_table(report, limit: int = 24) -> Table | Text:
    """The contamination matrix: rows = whose token stream, columns = whose isolated encoder rows."""
    if report.contamination is None and report.cells is not None:
        return cells_table(report, limit)
    ids = report.contamination_ids[:limit]
    if not ids or report.contamination is None:
        return Text("no contamination matrix (no request was re-executed)", style="dim")
    words = matrix_words(report)  # the TUI's panel says the same
    table = Table(title=data(words.title), show_lines=False)
    table.add_column(data(words.corner))
    for d in ids:
        table.add_column(data(d), justify="right")
    for i, r in enumerate(ids):
        cells = []
        for j, _ in enumerate(ids):
            v = report.contamination[i][j]
            if v is None:
                cells.append(Text("–", style="dim"))
                continue
            colour = scale_color(max(0.0, min(1.0, v)))
            fg = "black" if v > 0.6 else "white"
            cells.append(Text(f"{v:.2f}", style=f"{fg} on rgb{colour}" + (" bold" if i != j and v >= 0.9999 else "")))
        table.add_row(data(r), *cells)
    return table


def timeline_table(report, limit: int = 40) -> Table:
    """Per request, its events in time order, one glyph each (writes and syncs @offset, overwrites ←donor@offset).

    A replay's sync says what was measured in its stream (`landed`): the visual offset and donor the requests table
    shows; the fault's own events are labels and are not drawn (the caption counts them).
    """
    legend = " · ".join(f"{look.glyph} {look.label}" for look in EVENT_LOOK.values())
    if report.kind == "capture":
        legend += f" · {EVENT_LOOK[EventKind.SYNC].glyph}@v←d d's rows landed at v (measured)"
    table = Table(title=data(f"offset timeline ({legend})"), caption=data(labels_note(report)) if labels_note(report) else None)
    table.add_column("request")
    table.add_column("events in time order")
    by_request: dict[str, list] = {}
    for e in drawn_events(report):
        by_request.setdefault(e.request_id or "(none)", []).append(e)
    order = [r.id for r in report.requests] + [k for k in by_request if k not in {r.id for r in report.requests}]
    for rid in order[:limit]:
        line = Text()
        for e in sorted(by_request.get(rid, []), key=lambda e: (e.t if e.t is not None else 0, e.seq)):
            look = kind_look(e.kind)
            label, style = look.glyph, look.style
            out = measured(report, e.request_id) if e.kind == EventKind.SYNC else None
            if out is not None:  # where the rows landed, measured (the table's visual@ and donor)
                label += f"@{offset_cells(out)[1]}"
                if donor_cell(out):
                    label, style = label + f"←{donor_cell(out)}", EVENT_LOOK[EventKind.BUFFER_OVERWRITE].style
            elif e.kind in (EventKind.BUFFER_WRITE, EventKind.SYNC) and e.offset is not None:
                label += f"@{e.offset}"
            if e.kind == EventKind.BUFFER_OVERWRITE:
                label += f"←{e.donor}@{e.offset}"
            if e.kind == EventKind.DESYNC:
                label += f" v{e.offset}≠t{e.text_offset}"
            line.append(data(label, style))
            line.append(" ")
        table.add_row(data(rid), line)
    return table


def cells_table(report, limit: int = 24) -> Table | Text:
    """The sparse contamination matrix: one row per non-empty cell (victim, donor, score, evidence)."""
    cells = report.contamination_cells()
    if not cells:
        return Text("no contamination: no request received another request's visual rows", style="green")
    table = Table(title=f"contamination: {len(cells)} request(s) received another request's visual rows")
    for col in ("request", "rows of", "score", "evidence"):
        table.add_column(col, overflow="fold", no_wrap=col != "evidence")
    for cell in cells[:limit]:
        table.add_row(data(cell["request_id"]), data(cell["donor"], "bold red"), f"{cell['score']:.2f}", data(cell["evidence"]))
    if len(cells) > limit:
        table.caption = f"first {limit:,} of {len(cells):,}"
    return table
