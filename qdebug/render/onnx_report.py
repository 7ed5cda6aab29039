"""Rich renderable for `diff --onnx`: the first token's top-k of the reference and the export, rank by rank."""

from __future__ import annotations

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from .data_text import data


def first_token_table(result) -> Table:
    """Rank | A token, probability | B token, probability; rows where the two disagree in red."""
    table = Table(title="first token after prefill: top-k side by side")
    columns: tuple[tuple[str | Text, JustifyMethod], ...] = (("rank", "right"), (data(result.a_label), "left"), ("p", "right"),
                                                             (data(result.b_label), "left"), ("p", "right"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    step = result.steps[0] if result.steps else None
    a, b = (step.a_topk, step.b_topk) if step else ([], [])
    for rank in range(max(len(a), len(b))):
        ra = a[rank] if rank < len(a) else None
        rb = b[rank] if rank < len(b) else None
        same = ra is not None and rb is not None and ra["token_id"] == rb["token_id"]
        table.add_row(f"{rank + 1:d}", data(repr(ra["token"]) if ra else ""), f"{ra['prob']:.4f}" if ra else "",
                      data(repr(rb["token"]) if rb else ""), f"{rb['prob']:.4f}" if rb else "", style="" if same else "red")
    return table
