"""EventTimeline: every request's events on one aligned time axis (overwrites highlighted), and the event list."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from qdebug.render.data_text import data
from qdebug.render.event_clock import since_first
from qdebug.render.landed import donor_cell, drawn_events, labels_note, measured, offset_cells
from qdebug.render.palette import EVENT_LOOK, kind_look
from qdebug.shown import shown
from qdebug.vocab import EventKind


def _clock(report):
    """(x of an event, unit, heading): a log is read on its timestamps, in ms since its first event as the PNG draws
    them (never raw epoch ms); a replay on its event order (its schedule), whose waves are ms apart."""
    clock = since_first(report.events) if report.kind == "runtime-log" else None
    if clock is not None:
        t0, label = clock
        return (lambda e: (e.t - t0) * 1000.0), "ms", label
    return (lambda e: float(e.seq)), "#", ""  # the # axis says it is the order


def timeline_text(report, width: int, selected: str | None, listed: bool = True) -> Text:
    """Lanes (one per request), an axis, a legend, then (`listed`) the events in time order.

    A replay's sync is drawn and listed with what was measured in its stream (the requests table's visual offset and
    donor); the fault's own events are labels, left out (a line counts them)."""
    _when, unit, heading = _clock(report)
    events = sorted(drawn_events(report), key=lambda e: (_when(e), e.seq))
    ids = [r.id for r in report.requests] + sorted({e.request_id for e in events if e.request_id} - {r.id for r in report.requests})
    if not events:
        return Text("no events in this report", style="dim")
    label_width = min(40, max(len(shown(i, None)) for i in ids)) + 2  # ids are data: escaped, and a long one cut
    t0, t1 = _when(events[0]), _when(events[-1])
    cells = max(20, width - label_width - 10)
    scale = (cells - 1) / ((t1 - t0) or 1.0)
    out = Text()
    for rid in ids:
        lane: list[tuple[str, str, int]] = [("─", "dim", 0)] * (cells + 8)
        landed = measured(report, rid)
        for e in (e for e in events if e.request_id == rid):
            # a sync that delivered another request's rows is drawn as what it was: an overwrite by that donor
            look = kind_look(EventKind.BUFFER_OVERWRITE if e.kind == EventKind.SYNC and landed is not None and donor_cell(landed) else e.kind)
            x = round((_when(e) - t0) * scale)
            if look.rank >= lane[x][2]:  # one glyph per event: offsets and donors are in the list below
                lane[x] = (look.glyph, look.style, look.rank)
        mark = "▶" if rid == selected else " "
        name = shown(rid, None)
        name = name if len(name) < label_width else name[: label_width - 2] + "…"
        out.append(f"{mark}{name:<{label_width - 1}}", style="bold reverse" if rid == selected else "bold")
        for ch, style, _ in lane:
            out.append(data(ch, style))
        out.append("\n")
    axis = f"{unit}{t0:.0f}" if unit == "#" else f"{t0:.0f}{unit}"
    end = f"{unit}{t1:.0f}" if unit == "#" else f"{t1:.0f}{unit}"
    out.append(data(" " * label_width + axis + " " * max(1, cells - len(axis) - len(end) + 1) + end, "dim"))
    out.append("\n")
    if heading:
        out.append(data(" " * label_width + heading, "dim"))
        out.append("\n")
    for i, look in enumerate(EVENT_LOOK.values()):
        if i == 5:
            out.append("\n")
        out.append(data(look.glyph, look.style))
        out.append(data(f" {look.label}  ", "dim"))
    out.append("\n")
    if labels_note(report):
        out.append(data(labels_note(report), "dim italic"))
        out.append("\n")
    for e in events if listed else ():
        bad = kind_look(e.kind).alarm
        style = "bold red" if bad else ("bold" if e.request_id == selected else "dim")
        when = f"{_when(e):7.1f}{unit}" if unit == "ms" else f"#{e.seq:<5}"
        landed = measured(report, e.request_id) if e.kind == EventKind.SYNC else None
        if landed is not None:  # the measured place and owner of the rows, not the offset the sync step used
            text_at, visual_at = offset_cells(landed)
            donor = donor_cell(landed)
            detail = f"visual@{visual_at} text@{text_at} (measured), " + (f"rows of {donor}" if donor else "its own rows")
            style = "bold red" if donor else style
        else:
            detail = ", ".join(p for p in (
                f"offset {e.offset}" if e.offset is not None else "",
                f"{e.tokens} tokens" if e.tokens is not None else "",
                f"donor {e.donor}" if e.donor else "",
                e.message,
            ) if p)
        out.append(data(f"{when}  {e.request_id or '–':<4} {e.kind:<20} {detail}", style))  # ids, kinds, a log's message: data
        out.append("\n")
    out.rstrip()
    out.no_wrap, out.overflow = True, "ellipsis"  # one line per event, cut at the panel's edge
    return out


class EventTimeline(Widget):
    """The burst's event timeline; set `report` and `selected` (a request id)."""

    report = reactive(None, always_update=True, layout=True)
    selected: reactive[str | None] = reactive(None)

    def render(self):
        """Draw at the widget's width."""
        if self.report is None:
            return Text("")
        return timeline_text(self.report, self.size.width, self.selected)
