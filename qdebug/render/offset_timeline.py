"""The offset-timeline PNG: buffer writes over time and offset, overwrites with their donors, syncs, request lanes.

x is time in milliseconds from the first event (wall-clock start in the axis label; event order only when the
events carry no time), y the visual-buffer offset. A large log is drawn binned by time from its index.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from qdebug.vocab import EVENT_KINDS, EventKind, Verdict

from .event_clock import since_first
from .files import pyplot
from .label_place import LabelPlacer
from .landed import donor_cell, drawn_events, labels_note, measured, offset_cells
from .palette import EVENT_LOOK, kind_look
from .png_text import DPI, save

_WRITES = f"({EVENT_KINDS.index(EventKind.BUFFER_WRITE)}, {EVENT_KINDS.index(EventKind.BUFFER_OVERWRITE)})"  # kind codes in the index

# Up to this many events the picture shows every write; beyond it, writes are binned by time and offset.
DETAILED_EVENTS = 3_000
MAX_LANES = 40
# Events drawn on a request's lane (writes are drawn above, in the offset panel).
_LANE_KINDS = (EventKind.ENCODE_START, EventKind.SYNC, EventKind.FIRST_TOKEN, EventKind.BUFFER_OVERWRITE, EventKind.DESYNC,
               EventKind.SHAPE_MISMATCH, EventKind.INDEX_OUT_OF_BOUNDS)
# The PNG text chunk that carries every label the picture shows, so a test (or a user) can check them against the report.
LABELS_KEY = "qdebug-labels"
_TAB = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray")


def _clock(events):
    """(x of an event, x-axis label): ms from the first timestamp, or event order without timestamps."""
    clock = since_first(events)
    if clock is not None:
        t0, label = clock
        return (lambda e: (e.t - t0) * 1000.0), label
    return (lambda e: float(e.seq)), "event order (the events carry no time)"


def _text_offsets(report) -> dict[str, int]:
    """Each request's textual offset: its outcome's, else its last desync event's."""
    out = {r.id: r.text_offset for r in report.requests if r.text_offset is not None}
    for e in report.events:
        if e.kind == EventKind.DESYNC and e.request_id is not None and e.text_offset is not None:
            out.setdefault(e.request_id, e.text_offset)
    return out


def _overwrite_note(e, before_sync: set[int]) -> str:
    """What an overwrite's label adds, by the findings' rule: nothing when it contaminated, else why it did not."""
    if e.seq in before_sync:
        return ""
    return " (its own rows)" if e.donor == e.request_id else " (after sync)"


def _sync_label(report, sync, text_at: dict[str, int]) -> tuple[str, str]:
    """(A sync's label, the donor it names or ""): where the request's rows landed and whose they are, as the requests table says (`landed`).

    A replay measures where the rows in each stream sit and whose they are; the sync event only says where it put
    the buffer, which may hold another request's rows. A log's sync says what its line says.
    """
    glyph = EVENT_LOOK[EventKind.SYNC].glyph
    out = measured(report, sync.request_id)
    if out is not None:
        text, visual = offset_cells(out)
        donor = donor_cell(out)
        return f"{glyph} {sync.request_id}: visual@{visual} text@{text}" + (f" rows of {donor}" if donor else ""), donor
    t = text_at.get(sync.request_id)
    out = report.outcome(sync.request_id) if sync.request_id is not None else None
    donor = donor_cell(out) if out is not None else ""
    return (f"{glyph} {sync.request_id}: visual@{'–' if sync.offset is None else sync.offset}" + (f" text@{t}" if t is not None else "")
            + (f" rows of {donor}" if donor else "")), donor


def _lane_legend(lanes) -> None:
    """One handle per lane kind, each with the marker the lanes draw (no two kinds share one)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker=EVENT_LOOK[k].marker, color=EVENT_LOOK[k].colour, ms=5, label=EVENT_LOOK[k].label)
               for k in _LANE_KINDS]
    lanes.legend(handles=handles, ncol=len(handles), fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False,
                 borderaxespad=0.2, handletextpad=0.3, columnspacing=1.2)


def _detailed(report, fig, top, lanes) -> list[str]:
    """Every write as a bar over [offset, offset + tokens) from when it landed until its request synced; returns the labels placed."""
    import matplotlib.patches as mpatches

    from qdebug.analysis.replay import contaminating_overwrites

    events = sorted(drawn_events(report), key=lambda e: e.seq)  # evidence only: a fault's labels are not drawn
    x_of, xlabel = _clock(events)
    xs = [x_of(e) for e in events]
    span = (max(xs) - min(xs)) or 1.0
    min_w = span * 0.012
    ids = list(dict.fromkeys([r.id for r in report.requests] + [e.request_id for e in events if e.request_id]))
    colour = {rid: _TAB[i % len(_TAB)] for i, rid in enumerate(ids)}
    sync_x: dict[str, float] = {}
    for e in events:
        if e.kind == EventKind.SYNC and e.request_id is not None:
            sync_x[e.request_id] = x_of(e)
    # Limits first: labels are placed (and kept off the bars and each other) in pixels, which depend on them.
    top_y = max([e.offset + float(e.tokens or 1) for e in events if e.offset is not None and e.kind in (EventKind.BUFFER_WRITE, EventKind.BUFFER_OVERWRITE, EventKind.SYNC)] or [1.0])
    top.set_ylim(0, top_y * 1.15)
    top.set_xlim(min(xs) - span * 0.03, max(xs) + span * 0.15)
    labels = LabelPlacer(top)
    # The findings' rule, not the matrix: an overwrite is drawn and labelled as contaminating exactly when a finding says
    # it came before the victim's sync (the matrix names who the stream finally holds, which may be another donor).
    before_sync = contaminating_overwrites(report)
    holds: dict[str, tuple[float, float, float, float]] = {}  # request → the bar (x0, y0, x1, y1) holding its rows now
    to_label: list[tuple[float, float, str, str]] = []
    for e in events:
        if e.kind not in (EventKind.BUFFER_WRITE, EventKind.BUFFER_OVERWRITE) or e.offset is None:
            continue
        x, height = x_of(e), float(e.tokens or 1)
        end = sync_x.get(e.request_id, x + min_w)
        width = max(min_w, end - x)
        bar = (x, e.offset, x + width, e.offset + height)
        labels.block(*bar)
        if e.kind == EventKind.BUFFER_WRITE:
            top.add_patch(mpatches.Rectangle((x, e.offset), width, height, color=colour[e.request_id], alpha=0.55, lw=0))
            holds[e.request_id] = bar
            to_label.append((x, e.offset + height, f"{EVENT_LOOK[EventKind.BUFFER_WRITE].glyph} {e.request_id}@{e.offset}", colour[e.request_id]))
            continue
        # An overwrite: the donor's rows land in the victim's slot (red), the arrow from the bar that held the donor's rows.
        contaminating = e.seq in before_sync
        top.add_patch(mpatches.Rectangle((x, e.offset), width, height, facecolor=EVENT_LOOK[EventKind.BUFFER_OVERWRITE].colour, alpha=0.8 if contaminating else 0.35,
                                         hatch=None if contaminating else "//", lw=0.8, edgecolor="darkred"))
        target = (x, e.offset + height / 2)
        source = holds.get(e.donor) if e.donor != e.request_id else None
        if source is not None:  # from the point of the donor's bar nearest the slot; none when the donor has no bar of its own
            start = (min(max(target[0], source[0]), source[2]), min(max(target[1], source[1]), source[3]))
            if start != target:
                top.annotate("", target, xytext=start, arrowprops={"arrowstyle": "->", "color": "darkred", "lw": 1.3, "shrinkA": 0, "shrinkB": 0})
        if e.donor:
            holds[e.donor] = bar
        to_label.append((x, e.offset + height / 2, f"{e.donor}→{e.request_id}@{e.offset}" + _overwrite_note(e, before_sync), "darkred"))
    text_at = _text_offsets(report)
    sync = EVENT_LOOK[EventKind.SYNC]
    for e in events:
        if e.kind == EventKind.SYNC and e.offset is not None:
            x = x_of(e)
            top.plot([x], [e.offset], marker=sync.marker, color=sync.colour, ms=5, zorder=4)
            labels.block_point(x, e.offset)
            label, donor = _sync_label(report, e, text_at)
            to_label.append((x, e.offset, label, "darkred" if donor else "darkgreen"))
    # Overwrites first: when space runs out, the labels that carry the finding are the ones kept.
    for x, y, text, ink in sorted(to_label, key=lambda item: item[3] != "darkred"):
        labels.add(x, y, text, ink)
    top.set_ylabel("visual buffer offset (tokens)")
    # Lanes: encode → sync → first token, one thin line per request (the worst first when there are many).
    order = sorted(ids, key=lambda r: {Verdict.CONTAMINATED: 0, Verdict.DESYNC: 1, Verdict.ERROR: 2}.get(getattr(report.outcome(r), "verdict", Verdict.OK), 3))
    shown = order[:MAX_LANES]
    row = {rid: i for i, rid in enumerate(shown)}
    for rid in shown:
        own = [e for e in events if e.request_id == rid]
        if own:
            lanes.plot([x_of(own[0]), x_of(own[-1])], [row[rid]] * 2, color=colour[rid], lw=1.2)
        for e in own:
            if e.kind in _LANE_KINDS:
                look = kind_look(e.kind)
                lanes.plot([x_of(e)], [row[rid]], marker=look.marker, ms=4, color=look.colour if look.alarm else colour[rid])
    said = {r.id: f"{r.verdict}" + (f" ←{donor_cell(r)}" if donor_cell(r) else "") for r in report.requests}
    lanes.set_yticks(range(len(shown)), [f"{rid} {said.get(rid, '')}" for rid in shown], fontsize=6)
    lanes.set_ylim(len(shown) - 0.5, -0.5)
    notes = [] if len(order) <= MAX_LANES else [f"lanes: the {MAX_LANES} worst of {len(order)} requests"]
    if labels.dropped:
        notes.append(f"{labels.dropped} labels left out (no free place)")
    if labels_note(report):
        notes.append(labels_note(report))
    lanes.set_xlabel(xlabel + ("; " + "; ".join(notes) if notes else ""))
    _lane_legend(lanes)
    return labels.placed


def _binned(report, fig, top, lanes) -> None:
    """A large log from its index: writes per (time bin, offset bin) as a heat map, contaminating overwrites in red."""
    import numpy as np

    index = report.log_index
    t_lo, t_hi = index.time_range()
    conn = index.conn
    if t_lo is None:
        top.text(0.5, 0.5, "this log has no timestamps to bin by", ha="center", transform=top.transAxes)
        return
    span_ms = max(1.0, (t_hi - t_lo) * 1000)
    y_hi = conn.execute('SELECT max("offset" + coalesce(tokens, 1)) FROM events WHERE kind IN ' + _WRITES).fetchone()[0] or 1
    bins_x, bins_y = 240, 64
    grid = np.zeros((bins_y, bins_x))
    cur = conn.execute(f'SELECT t, "offset" FROM events WHERE kind IN {_WRITES} AND t IS NOT NULL AND "offset" IS NOT NULL')
    while rows := cur.fetchmany(100_000):
        arr = np.asarray(rows, dtype=float)
        h, _, _ = np.histogram2d(arr[:, 1], (arr[:, 0] - t_lo) * 1000, bins=(bins_y, bins_x), range=((0, y_hi), (0, span_ms)))
        grid += h
    top.imshow(np.log1p(grid), origin="lower", aspect="auto", cmap="Greys", extent=(0, span_ms, 0, y_hi))
    bad = conn.execute('SELECT e.t, e."offset" FROM contam c JOIN events e ON e.seq = c.seq WHERE e.t IS NOT NULL LIMIT 20000').fetchall()
    if bad:
        arr = np.asarray([(t, o if o is not None else 0) for t, o in bad], dtype=float)
        top.scatter((arr[:, 0] - t_lo) * 1000, arr[:, 1], s=6, color=EVENT_LOOK[EventKind.BUFFER_OVERWRITE].colour, label="contaminating overwrite", zorder=3)
        top.legend(fontsize=7, loc="upper right")
    top.set_ylabel("visual buffer offset (tokens)")
    per_min = index.per_minute(contaminating_only=True)
    if per_min:
        xs = [(m * 60 - t_lo) * 1000 for m, _ in per_min]
        lanes.bar(xs, [n for _, n in per_min], width=60_000, align="edge", color=EVENT_LOOK[EventKind.BUFFER_OVERWRITE].colour)
    top.set_xlim(0, span_ms)
    lanes.set_ylabel("overwrites / min", fontsize=7)
    start = dt.datetime.fromtimestamp(t_lo, dt.timezone.utc).isoformat(timespec="milliseconds")[:-6]
    lanes.set_xlabel(f"ms since the first event ({start} UTC); writes binned by time and offset (grey, log scale)")


def drawn_labels(png: str | Path) -> list[str]:
    """The text labels a timeline PNG shows (overwrites, writes, syncs), read back from the file itself."""
    from PIL import Image

    with Image.open(png) as im:
        return json.loads(im.info.get(LABELS_KEY, "[]"))


def draw_timeline(report, path: str | Path) -> Path:
    """Write the offset timeline of a replay or a runtime log as a PNG (atomically), its labels in the PNG's text chunk."""
    plt = pyplot()

    index = getattr(report, "log_index", None)
    binned = index is not None and index.count_events(report.event_filter) > min(DETAILED_EVENTS, len(report.events))
    n_lanes = 6 if binned else min(MAX_LANES, len({r.id for r in report.requests} | {e.request_id for e in report.events if e.request_id}))
    # size, dpi and margins first: labels are placed in pixels
    fig = plt.figure(figsize=(12, 5.5 + 0.16 * n_lanes), dpi=DPI)
    grid = fig.add_gridspec(2, 1, height_ratios=(5, max(1.2, 0.16 * n_lanes)), hspace=0.16, left=0.13, right=0.98, top=0.95, bottom=0.1)
    top = fig.add_subplot(grid[0])
    lanes = fig.add_subplot(grid[1], sharex=top)
    top.tick_params(labelbottom=False)
    top.set_title(f"offset timeline: {Path(str(report.source)).name}", fontsize=9)
    top.grid(alpha=0.25)
    lanes.grid(axis="x", alpha=0.25)
    placed: list[str] = []
    if not report.events and not binned:
        top.text(0.5, 0.5, "no events", ha="center", transform=top.transAxes)
    elif binned:
        _binned(report, fig, top, lanes)
    else:
        placed = _detailed(report, fig, top, lanes)
    # save_png's write, plus the labels: the picture carries what it says, for checks against the JSON
    return save(fig, path, metadata={LABELS_KEY: json.dumps(placed)})
