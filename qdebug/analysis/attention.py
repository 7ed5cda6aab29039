"""Attention over an image's merged-patch grid, from a Trace (no live model)."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.trace.tensor_names import TensorKind as T


@dataclass
class Peak:
    """The hottest cell of an attention grid."""

    image: int
    row: int
    col: int
    rows: int
    cols: int
    value: float

    def to_json(self) -> dict:
        """As {image, row, col, rows, cols}."""
        return {"image": self.image, "row": self.row, "col": self.col, "rows": self.rows, "cols": self.cols}


def attention_layers(trace) -> list[int]:
    """Layers whose attention rows were captured."""
    return trace.tensor_layers(T.LAYER_ATTN)


def step_query(trace, step: int) -> int:
    """Sequence position of the query token whose output chose generation step `step`."""
    return len(trace.input_ids) - 1 + step


def attention_grid(trace, image: int = 0, *, queries: list[int] | None = None, layer: int | None = None, head: int | None = None,
                   per_slice: bool = False):
    """`rows × cols` attention from the given query positions to one image's merged patches.

    Averaged over `queries` (default: the queries that chose each generated token), over layers unless
    `layer` is given, and over heads unless `head` is given, and over a video's temporal slices unless
    `per_slice` (then `t × rows × cols`). Returns a float32 tensor, or None if nothing was captured for that choice.
    """
    import torch

    img = trace.images[image]
    layers = attention_layers(trace) if layer is None else [layer]
    layers = [l for l in layers if trace.has_tensor(T.LAYER_ATTN, layer=l)]
    if not layers:
        return None
    if queries is None:
        queries = [step_query(trace, k) for k in range(len(trace.steps))]
    index = {p: i for i, p in enumerate(trace.attn_queries)}
    rows = [index[q] for q in queries if q in index]
    if not rows:
        return None
    offset = sum(im.tokens for im in trace.images[:image])
    stack = []
    for l in layers:
        a = trace.tensor(T.LAYER_ATTN, layer=l)  # H × q × image keys
        if a.shape[1] != len(trace.attn_queries):  # not one row per kept query: nothing to show for this layer
            continue
        a = a[:, rows, offset : offset + img.tokens].float()
        a = a.mean(0) if head is None else a[head]
        stack.append(a.mean(0))
    if not stack:
        return None
    grid = torch.stack(stack).mean(0)
    t = img.grid_thw[0]
    grid = grid.reshape(t, img.rows, img.cols)
    return grid if per_slice else grid.mean(0)


def peak_of(grid, image: int) -> Peak:
    """The argmax cell of a grid."""
    flat = int(grid.argmax())
    rows, cols = grid.shape
    return Peak(image, flat // cols, flat % cols, rows, cols, float(grid.max()))


def step_peak(trace, step: int, *, layer: int | None = None, head: int | None = None) -> Peak | None:
    """Peak over all images of the attention of step `step`'s query token."""
    best = None
    for img in trace.images:
        grid = attention_grid(trace, img.index, queries=[step_query(trace, step)], layer=layer, head=head)
        if grid is not None:
            p = peak_of(grid, img.index)
            best = p if best is None or p.value > best.value else best
    return best
