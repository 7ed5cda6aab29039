"""The Rich report of `qdebug attn`: generated text, stage table, top-k per step, heatmaps, findings."""

from __future__ import annotations

from rich.console import Group
from rich.columns import Columns
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from qdebug.trace.summaries import TensorStats
from qdebug.vocab import StageName, is_layer_stage, is_step_stage

from .data_text import data
from .findings import findings_panel
from .heatmap import heatmap, legend, thumbnail
from .media_words import is_video


def stage_table(trace) -> Table:
    """One row per stage: what it holds and whether its checks passed."""
    table = Table(title="stages", expand=False)
    table.add_column("stage", style="bold")
    table.add_column("what")
    table.add_column("checks")
    for stage in trace.stages.values():
        table.add_row(data(stage.name), data(_stage_what(trace, stage)), _checks_text(stage))
    return table


def _stage_what(trace, stage) -> str:
    s = stage.summary
    if trace.mixed_media and stage.name in (StageName.PREPROCESS, StageName.ENCODE, StageName.SYNC):
        from .media_report import media_stage_what

        return media_stage_what(stage) or ""
    if is_video(trace) and stage.name in (StageName.PREPROCESS, StageName.SYNC):
        from .video_report import video_stage_what

        return video_stage_what(stage) or ""
    if trace.meta.audio and stage.name in (StageName.PREPROCESS, StageName.ENCODE, StageName.SYNC):
        from .audio_strip import audio_stage_what

        return audio_stage_what(stage) or ""
    if stage.name == StageName.PREPROCESS:
        return f"{s.num_tokens} tokens, pixel_values {s.pixel_values_shape}, grid_thw {s.image_grid_thw}, spans {s.spans}"
    if stage.name == StageName.ENCODE:
        word = "video" if is_video(trace) else "img"  # each item by its modality
        return "; ".join(f"{word} {i.image}: {i.rows}×{i.dim} |x| mean {i.stats.norm_mean:.3g} fp {i.fingerprint[:8]}" for i in s.images or [])
    if stage.name == StageName.SYNC:
        parts = [f"img {i.image}: text@{i.text_offset} visual@{i.visual_offset} rows {i.rows}/{i.placeholders}" for i in s.images or []]
        if s.rope_deltas is not None:
            parts.append(f"rope_deltas {s.rope_deltas}")
        return "; ".join(parts)
    if is_layer_stage(stage.name):
        st = s.stats or TensorStats(mean=0, std=0, max_abs=0)
        what = f"hidden {st.shape} mean {st.mean:.3g} std {st.std:.3g} max|x| {st.max_abs:.3g}" + (" +attn" if s.attn_shape is not None else "")
        if s.kind == "linear_attention":
            what += " · linear attention (no attention matrix)"
        deep = s.deepstack
        if deep and deep.get("added"):
            what += f" · +deepstack level {deep['level']} to {deep['rows']} rows (×{deep['relative_norm']:.2f} of |h|)"
        return what
    if stage.name == StageName.LOGITS:
        return f"{s.positions} positions, next: {', '.join(map(repr, s.last_topk or []))}"
    if is_step_stage(stage.name):
        return f"{s.token!r} p={s.prob:.3f} H={s.entropy:.3f}"
    return ""


def _checks_text(stage) -> Text:
    if not stage.checks:
        return Text("–", style="dim")
    bad = [c for c in stage.checks if not c.ok]
    if not bad:
        return Text(f"{len(stage.checks)} ok", style="green")
    return data("; ".join(f"✗ {c.name} ({c.detail})" for c in bad), "bold red")


def topk_table(trace, limit: int | None = None) -> Table:
    """Per generated token: the chosen token and the top-k alternatives with probabilities."""
    table = Table(title="top-k per generated token")
    table.add_column("step", justify="right")
    table.add_column("token", style="bold")
    table.add_column("p", justify="right")
    table.add_column("H", justify="right")
    table.add_column("top-k")
    for step in trace.steps[:limit]:
        alts = "  ".join(f"{t!r} {p:.2f}" for t, p in zip(step.topk.tokens, step.topk.probs))
        table.add_row(f"{step.index:d}", data(repr(step.token)), f"{step.prob:.3f}", f"{step.entropy:.2f}", data(alts))
    return table


def heatmap_panel(trace, image, grid, title: str, pil_image=None) -> Panel:
    """The attention grid of one image beside the image thumbnail, with a colour legend."""
    from qdebug.analysis.attention import peak_of

    peak = peak_of(grid, image.index)
    pictures = [heatmap(grid, marker=(peak.row, peak.col))]
    if pil_image is not None:
        pictures.append(thumbnail(pil_image, image.rows, image.cols))
    body = Group(
        Columns(pictures, padding=(0, 2)),
        legend(float(grid.min()), float(grid.max())),
        Text(f"peak: row {peak.row:d}, col {peak.col:d} of {peak.rows:d}×{peak.cols:d}"),
    )
    return Panel(body, title=data(title), expand=False)


def attn_renderables(result) -> list:
    """What `qdebug attn` shows for an AttnResult, top to bottom."""
    from qdebug.analysis.attention import step_query
    from qdebug.analysis.item_attention import drawn_as

    trace = result.trace
    model = trace.meta.model
    about = f"{model['spec']} · {model['architecture']} · {model['device']} · {model['dtype']}"
    text = trace.generated_text or "(empty)"
    body, subtitle = data(text, "bold", newlines=True), data(about)
    out = [
        Panel(body, title="generated", subtitle=subtitle, width=max(body.cell_len, subtitle.cell_len) + 6),
        data(trace.meta.attn_capture or "", "dim"),
        data(_processors_line(trace), "dim"),
        stage_table(trace),
        topk_table(trace),
    ]
    queries = [step_query(trace, result.token)] if result.token is not None else None
    what = f"step {result.token}" if result.token is not None else "all generated tokens"
    sel = f"layer {result.layer}" if result.layer is not None else "mean of layers"
    sel += f", head {result.head}" if result.head is not None else ", mean of heads"
    kind = drawn_as(trace)
    if kind is not None:
        out.extend(p for p in _PANELS[kind](result, queries, what, sel) if p is not None)
    out.append(findings_panel(trace.findings))
    return out


def _image_panels(result, queries: list[int] | None, what: str, sel: str) -> list[Panel | None]:
    """Each image's heatmap of the chosen queries beside its thumbnail."""
    from qdebug.analysis.attention import attention_grid

    trace = result.trace
    out: list[Panel | None] = []
    for img in trace.images:
        grid = attention_grid(trace, img.index, queries=queries, layer=result.layer, head=result.head)
        if grid is not None:
            out.append(heatmap_panel(trace, img, grid, f"image {img.index} ← {what} ({sel})", result.pil_images[img.index]))
    return out


def _video_panels(result, queries: list[int] | None, what: str, sel: str) -> list[Panel | None]:
    """Each video's heatmap per temporal slice: every generated token's, as the JSON and the PNG give its peak."""
    from .video_report import video_panel

    return [video_panel(result.trace, img, f"video {img.index} ← all generated tokens, per temporal slice ({sel})", layer=result.layer,
                        head=result.head) for img in result.trace.images]


def _clip_panels(result, queries: list[int] | None, what: str, sel: str) -> list[Panel | None]:
    """Each clip's attention strip under its waveform."""
    from qdebug.analysis.item_attention import attention_strip, clip_items

    from .audio_strip import strip_panel

    trace = result.trace
    out: list[Panel | None] = []
    for clip in clip_items(trace):
        strip = attention_strip(trace, clip.index, queries=queries, layer=result.layer, head=result.head)
        if strip is not None and strip.numel():
            out.append(strip_panel(trace, clip, strip, f"clip {clip.index} ← {what} ({sel})"))
    return out


# each modality's attention panels in the report (result, queries, what, sel) → panels, keyed as `drawn_as` names a request
_PANELS = {"image": _image_panels, "video": _video_panels, "audio": _clip_panels}


def _processors_line(trace) -> str:
    """What generate chose from: the checkpoint's logits processors, and the steps where raw and processed top-1 part."""
    names = trace.meta.processors or []
    if not names:
        return "generate chose from the raw logits (no logits processors in the generation config)"
    parted = [s.index for s in trace.steps if s.raw_topk is not None and s.raw_topk.token_ids[0] != s.token_id]
    where = f"; the raw top-1 differs from the choice at steps {parted}" if parted else "; the raw top-1 agrees at every step"
    return f"generate chose from processed scores ({', '.join(names)}); top-k shown are processed{where}"
