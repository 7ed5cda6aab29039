"""StageDetail: the selected stage's shapes, stats and checks with their verdicts."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from rich.segment import Segment

from qdebug.render.data_text import data
from qdebug.render.findings import findings_text
from qdebug.render.verdict_cell import verdict_text
from qdebug.trace.cached import cached_prefix
from qdebug.vocab import StageName, is_layer_stage

from ..state import View, findings_at
from .view_panel import Lines, ViewPanel

_SKIP = {"shape"}  # rows/dim say it already
_WAITING = {
    "pending": "pending: not reached yet",
    "running": "running: the worker is computing this stage",
    "paused": "the forward pass waits inside this stage's hook (n next stage · c continue · g next token)",
}
# a run stops at its start, as pdb does: nothing has run through the model yet
_AT_START = "a run stops at its start, as pdb does: the model has not run yet (n next stage · c continue · g first token)"


def fmt(value) -> str:
    """A summary value as short text."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return "–"
    if isinstance(value, list) and len(str(value)) > 60:
        return str(value)[:57] + "…"
    return str(value)


def record_label(rec: dict) -> str:
    """What a per-item record is about: `image 0`, `clip 1`, `video 0`, or a mixed-media item's `audio 1`."""
    if "modality" in rec:
        return f"{rec['modality']} {rec.get('index', '?')}"
    for key, word in (("video", "video"), ("audio", "clip"), ("image", "image")):
        if key in rec:
            return f"{word} {rec[key]}"
    return "item"


_IDENTITY = {"image", "audio", "video", "modality", "index"}  # said by the column header


def _records_table(records: list[dict]) -> Table:
    """A list of per-item dicts (images, clips, videos, mixed-media items), transposed: one row per field, one
    column per record."""
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="bold")
    table.add_column("", style="dim")
    for rec in records:
        table.add_column(data(record_label(rec)), overflow="fold")
    keys = [k for k in dict.fromkeys(k for r in records for k in r) if k not in _SKIP and k not in _IDENTITY]
    for key in keys:  # a trace's keys and values (a .qdt from anywhere): data
        cells = []
        for rec in records:
            cell = data(fmt(rec.get(key)))
            if key in ("nan", "inf") and rec.get(key):
                cell.stylize("bold red")
            cells.append(cell)
        table.add_row(data(key), *cells)
    return table


def summary_renderables(summary: dict) -> list:
    """Scalars as key: value lines; per-image lists as a table; the templated prompt shortened."""
    out: list = []
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim")
    grid.add_column(overflow="fold")
    for key, value in summary.items():
        if key == "note":
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            continue
        if key == "text":
            value = value.replace("\n", "⏎")
            value = value if len(value) <= 160 else value[:157] + "…"
            grid.add_row("prompt", data(value))
            continue
        grid.add_row(data(key), data(fmt(value)))
    out.append(grid)
    for key, value in summary.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.append(_records_table(value))
    if "note" in summary:
        out.append(data(summary["note"], "dim italic"))
    return out


def placeholder_runs(trace) -> dict[int, tuple[int, str]]:
    """start → (end, label) of every placeholder run of the trace's media items (`trace_items`): an image's span, each of
    a video's `<|video_pad|>` runs, each mixed-media item's runs, named by modality and index (an audio family's: `clip N`)."""
    from qdebug.trace.items import trace_items

    runs: dict[int, tuple[int, str]] = {}
    for item in trace_items(trace):
        label = f"clip {item.index}" if item.modality == "audio" and not trace.mixed_media else item.name
        runs.update({s: (e, label) for s, e in item.runs})
    return runs


def tokens_text(trace, limit: int = 400) -> Text:
    """The prompt's tokens in order, each placeholder run shown once as `<image I: N tokens @start>` (or clip, video,
    a mixed-media item)."""
    text = Text("tokens ", style="dim")
    runs = placeholder_runs(trace)
    pos, shown = 0, 0
    while pos < len(trace.tokens) and shown < limit:
        run = runs.get(pos)
        if run is not None:
            end, label = run
            text.append(data(f"<{label}: {end - pos} tokens @{pos}>", "bold cyan"))
            pos = end
        else:
            text.append(data(trace.tokens[pos].replace("\n", "⏎").replace("Ċ", "⏎").replace("Ġ", "·")))
            pos += 1
        text.append(" ")
        shown += 1
    if pos < len(trace.tokens):
        text.append(f"… {len(trace.tokens) - pos} more", style="dim")
    return text


def checks_text(checks) -> Text:
    """Each check on a line with ✓/✗ and its detail."""
    text = Text()
    for c in checks:
        text.append("✓ " if c.ok else "✗ ", style="green" if c.ok else "bold red")
        text.append(data(c.name, "" if c.ok else "bold red"))
        if c.detail:
            text.append(data(f"  {c.detail}", "dim" if c.ok else "red"))
        text.append("\n")
    text.rstrip()
    return text


def _flat(summary: dict) -> dict:
    """Scalars of a summary, per-image records flattened to `image I key`."""
    out = {}
    for key, value in summary.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for rec in value:
                for k, v in rec.items():
                    if k != "image" and not isinstance(v, (list, dict)):
                        out[f"image {rec.get('image', '?')} {k}"] = v
        elif key not in ("note", "text") and not isinstance(value, (list, dict)):
            out[key] = value
    return out


def _differs(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) > 1e-5 * max(1.0, abs(a), abs(b))
    return a != b


def compare_text(stage, other, role: str, limit: int = 6, own_rows: bool = False) -> Text:
    """What differs at this stage from the counterpart trace (the isolated reference or the replayed run); `own_rows`:
    the traces' `visual_offset` is named `own_rows_at`, as the detail above names it beside the replay's measure."""
    text = data(f"vs {role}: ", "bold")
    if other is None:
        return text.append("stage missing there", style="yellow")
    mine, theirs = _flat(stage.summary.to_json()), _flat(other.summary.to_json())
    if own_rows:
        mine, theirs = ({k.replace("visual_offset", "own_rows_at"): v for k, v in d.items()} for d in (mine, theirs))
    diffs = [k for k in mine if k in theirs and _differs(mine[k], theirs[k])]
    diffs.sort(key=lambda k: not k.endswith(("fingerprint", "token", "offset")))  # the telling ones first
    if not diffs:
        return text.append("the same ✓", style="green")
    for k in diffs[:limit]:
        text.append("\n")
        text.append(data(f"  {k}: {fmt(mine[k])} ≠ {fmt(theirs[k])}", "bold red"))
    if len(diffs) > limit:
        text.append(f"\n  … {len(diffs) - limit} more", style="red")
    return text


def replay_measured(summary: dict, outcome) -> dict:
    """The sync summary with each image's `visual_offset` and `donor` as the replay measured them (the requests table's
    visual@ and donor, from the same field); the trace's own measure, where the image's own rows are, as `own_rows_at`."""
    measured = {im["index"]: im for im in outcome.images}
    images = []
    for rec in summary.get("images") or []:
        im = measured.get(rec.get("image"))
        if im is None:
            images.append(rec)
            continue
        rec = dict(rec)
        own = rec.pop("visual_offset", None)
        head = {k: rec.pop(k) for k in ("image", "text_offset") if k in rec}
        images.append({**head, "visual_offset": im.get("visual_offset"), "donor": im.get("donor") or "its own", "own_rows_at": own, **rec})
    return {**summary, "images": images}


def landed_text(outcome) -> Text:
    """One line per image: whose rows the replay measured in its span and where (what `qdebug replay` reports)."""
    text = Text("replay measured ", style="bold")
    for im in outcome.images:
        where = "nowhere as a block" if im["visual_offset"] is None else f"visual@{im['visual_offset']}"
        text.append("\n")
        if im.get("donor"):
            text.append(data(f"  image {im['index']}: rows of {im['donor']} ({where}, text@{im['text_offset']})", "bold red"))
        else:
            text.append(data(f"  image {im['index']}: its own rows ({where}, text@{im['text_offset']})",
                             "green" if im["visual_offset"] == im["text_offset"] else "bold red"))
    if outcome.donor:
        text.append("\n")
        text.append(data(f"  verdict {outcome.verdict}, donor {outcome.donor}", "bold red"))
    return text


def cached_text(trace, stage: str) -> Text | None:
    """A line saying which prompt positions an engine served from its prefix cache (not computed in the traced run) and
    from whom, at the stages whose rows start after them (preprocess, encode, sync, every layer); None for a whole trace."""
    cached = cached_prefix(trace)
    if cached is None or not (stage in (StageName.PREPROCESS, StageName.ENCODE, StageName.SYNC) or is_layer_stage(stage)):
        return None
    text = Text("prefix cache ", style="bold magenta")
    if stage != StageName.PREPROCESS:
        text.append(data(f"rows of positions {cached.end}..{len(trace.input_ids) - 1} only: ", "magenta"))
    return text.append_text(data(cached.words(), "magenta", 600))


def detail_renderable(view: View):
    """The whole panel for the selected stage."""
    name = view.sel.stage
    if view.doc is None or name is None:
        if view.run_line:  # a run started but has nothing to show yet
            return data(f"{view.run_line}…", "yellow")
        return Text("no request yet: `image PATH`, `prompt TEXT`, then `run` (or `open FILE.qdt`)", style="dim")
    stage = view.doc.trace.stages.get(name)
    title = data(name, "bold")
    parts: list = [title]
    served = cached_text(view.doc.trace, name)
    if served is not None:
        parts.append(served)
    if view.stage_status == "paused" and view.run_line:
        why = _AT_START if name == StageName.PREPROCESS else _WAITING["paused"]
        parts[0] = data(view.run_line, "bold black on yellow")
        parts.append(Text(why, style="yellow"))
    elif view.stage_status in _WAITING:
        parts.append(Text(_WAITING[view.stage_status], style="yellow" if view.stage_status != "pending" else "dim"))
    outcome = getattr(view.doc, "outcome", None)
    if outcome is not None and getattr(outcome, "stage", None) == name:  # an endpoint's verdict parts here (the CLI's @stage)
        parts.append(Text("the report's verdict: ", style="bold").append_text(verdict_text(outcome))
                     .append(" (the first stage where the runs part)", style="dim"))
    found = findings_at(view.doc.trace, name)
    if found:  # before the summary: a finding is why a user looks at this stage
        parts.append(Text("findings", style="bold underline"))
        parts.append(findings_text(found))
    if stage is None:
        return Group(*parts)
    summary = stage.summary.to_json()
    measured = name == StageName.SYNC and getattr(view.doc, "outcome", None) is not None and bool(view.doc.outcome.images)
    if measured:
        summary = replay_measured(summary, view.doc.outcome)
        parts.append(landed_text(view.doc.outcome))
    parts.extend(summary_renderables(summary))
    if name == StageName.PREPROCESS:
        parts.append(tokens_text(view.doc.trace))
    for other in view.doc.others:  # the same request's other runs: the reference; an endpoint's three ways
        parts.append(compare_text(stage, other.trace.stages.get(name), other.role, own_rows=measured))
    if stage.checks:
        parts.append(Text("checks", style="bold underline"))
        parts.append(checks_text(stage.checks))
    else:
        parts.append(Text("no checks at this stage", style="dim"))
    return Group(*parts)


class StageDetail(ViewPanel):
    """Shapes, stats and checks of the selected stage; set `view` to redraw, `scroll_lines(n)` to scroll.

    It fills its box and crops itself (with a "more" line) instead of being a scroll container: a new stage
    then costs one repaint, never a layout pass of the whole screen.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.offset_y = 0
        self._lines: list = []
        self._all: dict = {}

    def view_key(self, view: View) -> tuple:
        """The document, the stage and its status."""
        return (view.doc, view.sel.stage, view.stage_status, view.run_line)

    def watch_view(self, old: View | None, new: View | None) -> None:
        """A new stage starts at the top."""
        if old is None or new is None or self.view_key(old) != self.view_key(new):
            self.offset_y = 0
        super().watch_view(old, new)

    def all_lines(self, view: View) -> list:
        """Every line of the detail of `view` at the panel's width (cached; prefetch fills it ahead)."""
        width = max(10, self.size.width)
        key = (self.view_key(view), width)
        if key not in self._all:
            if len(self._all) > 64:
                self._all.clear()
            console = self.app.console
            self._all[key] = console.render_lines(detail_renderable(view), console.options.update(width=width, height=None), pad=False)
        return self._all[key]

    def prefetch(self, view: View) -> None:
        """Render the detail of `view` ahead (idle time)."""
        if self.size.width:
            self.all_lines(view)

    def scroll_lines(self, delta: int) -> None:
        """Scroll the detail by `delta` lines."""
        self.offset_y = max(0, min(self.offset_y + delta, max(0, len(self._lines) - self.size.height + 1)))
        self.refresh()

    def on_mouse_scroll_down(self, event) -> None:
        """Mouse wheel."""
        self.scroll_lines(2)

    def on_mouse_scroll_up(self, event) -> None:
        """Mouse wheel."""
        self.scroll_lines(-2)

    def render(self):
        """The visible part of the detail, with a line saying how much more there is."""
        if self.view is None:
            return Text("")
        height = max(1, self.size.height)
        self._lines = self.all_lines(self.view)
        total = len(self._lines)
        if total <= height:
            return Lines(self._lines)
        top = min(self.offset_y, total - height + 1)
        shown = self._lines[top : top + height - 1]
        more = total - top - len(shown)
        hint = f"↓ {more} more lines (shift+↓/↑ or the wheel scroll)" if more else f"↑ {top} lines above (shift+↑)"
        return Lines([*shown, [Segment(hint, self.app.console.get_style("dim"))]])

    @property
    def text(self) -> str:
        """The whole detail as plain text (tests)."""
        return "\n".join("".join(seg.text for seg in line) for line in self._lines)
