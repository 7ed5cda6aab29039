"""TopKPanel: a bar chart of the next-token distribution at the cursor position (or generation step), and its entropy."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from qdebug.trace.tensor_names import TensorKind as T

from ..state import View
from .view_panel import ViewPanel

BAR = 18


def topk_rows(view: View, pos: int) -> tuple[list[tuple[str, float]], float | None, str | None, str]:
    """(token, prob) rows, entropy, the chosen token (for a step) and a title, for position `pos`."""
    doc = view.doc
    if doc is None:
        return [], None, None, "no request yet"
    trace = doc.trace
    step = doc.step_chosen_at(pos)
    if step is not None:
        s = trace.steps[step]
        return list(zip(s.topk.tokens, s.topk.probs)), s.entropy, s.token, f"step {step} (from pos {pos})"
    ids, probs, ent = (trace.tensor_or_none(k) for k in (T.LOGITS_TOPK_IDS, T.LOGITS_TOPK_PROBS, T.LOGITS_ENTROPY))
    if ids is None or pos >= ids.shape[0]:
        return [], None, None, f"pos {pos}"
    nxt = doc.token_at(pos + 1) if pos + 1 < doc.length else None
    rows = [(doc.token_text(int(i)), float(p)) for i, p in zip(ids[pos].tolist(), probs[pos].tolist())]
    return rows, float(ent[pos]) if ent is not None else None, nxt, f"next token after pos {pos}"


def topk_renderable(view: View):
    """The bar chart (the chosen / actual next token highlighted)."""
    if view.doc is None:
        return Text("top-k: no request yet", style="dim")
    pos = view.pos_on(view.doc)
    rows, entropy, chosen, title = topk_rows(view, pos)
    table = Table.grid(padding=(0, 1))
    table.add_column(justify="right", no_wrap=True, max_width=14)
    table.add_column(no_wrap=True)
    table.add_column(justify="right")
    table.title = title
    for token, p in rows[: view.sel.topk]:
        full = int(p * BAR * 8)
        bar = "█" * (full // 8) + ("▏▎▍▌▋▊▉"[full % 8 - 1] if full % 8 else "")
        mark = token == chosen
        table.add_row(Text(repr(token), style="bold green" if mark else ""), Text(f"{bar:<{BAR}}", style="green" if mark else "cyan"), f"{p:.3f}")
    if not rows:
        why = "not captured at this position" if view.doc.complete else "not computed yet (logits come after the layers)"
        table.add_row("", Text(why, style="dim"), "")
    foot = Text()
    if entropy is not None:
        foot.append(f"entropy {entropy:.3f} nats", style="bold")
    if chosen is not None:
        foot.append(f"  → {chosen!r}", style="green")
    if len(rows) < view.sel.topk and rows:
        foot.append(f"\n(trace kept top-{len(rows)})", style="dim")
    from rich.console import Group

    return Group(table, foot)


class TopKPanel(ViewPanel):
    """Top-k bars at the cursor; set `view` to redraw."""

    def view_key(self, view: View) -> tuple:
        """The document, the cursor and how many rows."""
        return (view.doc, view.pos, view.sel.topk)

    PRERENDER = True

    def renderable(self, view: View):
        """The bars for `view`."""
        return topk_renderable(view)
