"""The Rich report of `qdebug diff`: per-stage differences, the first divergence, steps side by side, heatmaps."""

from __future__ import annotations

from rich.console import Group, JustifyMethod
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from qdebug.vocab import StageVerdict

from .data_text import data
from .findings import findings_panel
from .media_words import order_label, visual_word


def _num(x: float | None) -> str:
    if x is None or x != x:
        return "–"
    return "0" if x == 0 else f"{x:.3g}"


def _cell(x) -> str:
    """A value for a table cell: "–" where it is unknown (never Python's None)."""
    return "–" if x is None else str(x)


def _token(x: str | None) -> str:
    """A generated token as the report quotes it, "–" where a run generated none."""
    return "–" if x is None else repr(x)


def where(stage) -> str:
    """The row a stage parts at (or moved most, when within tolerance): "token N (kind)", "" when it has none.

    The header, the stages table and the first-divergence finding all name this one row.
    """
    if stage.token_index is None:
        return ""
    return f"token {stage.token_index}" + (f" ({stage.token_kind})" if stage.token_kind else "")


def stages_table(result) -> Table:
    """One row per stage in canonical order; the first divergent stage highlighted."""
    first = result.first_divergence.name if result.first_divergence else None
    table = Table(title=data(f"{result.a_label}  vs  {result.b_label}   (atol {result.tolerance.atol:g}, rtol {result.tolerance.rtol:g})"))
    columns: tuple[tuple[str, JustifyMethod], ...] = (("stage", "left"), ("max |a-b|", "right"), ("rel", "right"), ("cosine", "right"),
                                                      ("verdict", "left"), ("where", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for s in result.stages:
        style = "bold red" if s.name == first else ("red" if s.verdict == StageVerdict.DIVERGED else ("dim" if s.verdict == StageVerdict.MISSING else ""))
        at = where(s)
        if s.detail and s.verdict != StageVerdict.OK:
            at = f"{at} {s.detail}".strip()
        verdict = data("◀ first divergence" if s.name == first else s.verdict)
        table.add_row(data(s.name), data(_num(s.max_abs)), data(_num(s.rel)), "–" if s.cosine != s.cosine else f"{s.cosine:.6f}", verdict, data(at),
                      style=style)
    return table


def steps_table(result, limit: int = 12) -> Table:
    """Top-k of both runs per generation step, with KL and agreement."""
    table = Table(title="generation steps: top-k side by side")
    for col in ("step", "A", "B", "KL(A‖B)", "top-k overlap", "A top-k", "B top-k"):
        table.add_column(col)
    for s in result.steps[:limit]:
        fmt = lambda rows: "  ".join(f"{r['token']!r} {r['prob']:.2f}" for r in rows[:3])
        table.add_row(f"{s.index:d}", data(_token(s.a_token)), data(_token(s.b_token)), data(_num(s.kl)), data(_num(s.topk_overlap)),
                      data(fmt(s.a_topk)), data(fmt(s.b_topk)), style="" if s.agree else "bold red")
    return table


def images_table(result, word: str = "image") -> Table:
    """One row per image (or video, `word`): placeholder span, where each run's rows landed, each run's attention peak."""
    table = Table(title=data(f"{word}s"))
    for col in (data(word), "span", "A visual offset", "B visual offset", "A attention peak", "B attention peak"):
        table.add_column(col)
    cell = lambda p: f"row {p['row']}, col {p['col']} of {p['rows']}×{p['cols']}" if p else "–"
    for img in result.images:
        # An offset a run did not record (an ONNX run keeps no sync summary) is unknown, not a misplaced image.
        ok = all(img[k] is None or img[k] == img["text_offset"] for k in ("a_visual_offset", "b_visual_offset"))
        table.add_row(data(img["index"]), data(f"{img['span'][0]}..{img['span'][1]}" if img["span"] else "–"), data(_cell(img["a_visual_offset"])),
                      data(_cell(img["b_visual_offset"])), data(cell(img["a_attention_peak"])), data(cell(img["b_attention_peak"])), style="" if ok else "red")
    return table


def heatmap_panels(trace_a, trace_b, labels: tuple[str, str]) -> list:
    """Each image's attention heatmap (mean of generated tokens, layers and heads) in run A and run B."""
    from qdebug.analysis.attention import attention_grid

    from .attn_report import heatmap_panel

    out, word = [], visual_word(trace_a)
    for img in trace_a.images:
        for label, trace in zip(labels, (trace_a, trace_b)):
            grid = attention_grid(trace, img.index) if img.index < len(trace.images) else None
            if grid is not None:
                out.append(heatmap_panel(trace, trace.images[img.index], grid, f"{label}: {word} {img.index} ← all generated tokens"))
    return out


def diff_renderables(order: str, result, trace=None) -> list:
    """What the terminal report shows for one comparison (`trace`: run A's, whose modality names the visual items)."""
    texts = Text()
    texts.append(data(f"{result.a_label}: ", "bold"))
    texts.append(f"{result.a_text!r}\n")
    texts.append(data(f"{result.b_label}: ", "bold"))
    texts.append(f"{result.b_text!r}", style="" if result.a_text == result.b_text else "red")
    fd = result.first_divergence
    head = data(f"first divergence: {fd.name}" if fd else "no stage beyond tolerance", "bold red" if fd else "bold green")
    if fd is not None and where(fd):  # the row the table and the finding name: the first that parts, not the most moved
        head.append(data(f" at {where(fd)}" + (f", channel {fd.channel}" if fd.channel is not None else "")))
    shown = order_label(order, trace) if trace is not None else order
    title = f"diff ({shown})" if order not in ("traces",) else "diff of two traces"
    out = [Panel(Group(head, texts), title=data(title), expand=False), stages_table(result)]
    if result.images:
        out.append(images_table(result, visual_word(trace) if trace is not None else "image"))
    return out + [steps_table(result), findings_panel(result.findings)]


def diff_report(run, onnx: bool = False) -> list:
    """What `qdebug diff` shows for a DiffRun: each comparison, both runs' heatmaps, and with --onnx the first token's top-k."""
    out = []
    for comparison in run.comparisons:
        out += diff_renderables(comparison.order, comparison.result, comparison.trace_a)
        out += heatmap_panels(comparison.trace_a, comparison.trace_b, (comparison.result.a_label, comparison.result.b_label))
        if onnx:
            from .onnx_report import first_token_table

            out.append(first_token_table(comparison.result))
    return out
