"""Where one decoder layer's weight matrices are in an ONNX graph: as W, as Wᵀ, rearranged, or nowhere.

Exporters store a Linear's weight as W (Gemm) or Wᵀ (MatMul), the same way for every layer. A weight written
transposed shows up as the other layout than its siblings in other layers; a transposed write under the wrong
shape shows up as the same numbers in another order.
"""

from __future__ import annotations

from pathlib import Path

MAX_BYTES = 2 << 30  # larger graphs are not read whole just for this check


def _layouts(reference, arrays) -> str:
    import numpy as np

    w = reference
    for name, layout in (("W", w), ("Wᵀ", w.T)):
        if any(a.shape == layout.shape and np.array_equal(a, layout) for a in arrays):
            return name
    flat = np.sort(w, axis=None)
    if any(a.size == w.size and a.ndim == 2 and np.array_equal(np.sort(a, axis=None), flat) for a in arrays):
        return "rearranged"
    return "absent"


def layer_weight_layouts(graph_file: Path, loaded, layer: int) -> list[dict]:
    """For each 2-D weight of decoder layer `layer` (and the same weight in the other layers): how the graph holds it.

    Returns [{name, layout, others}] where `others` counts the layouts of that weight in the other layers."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph_file = Path(graph_file)
    size = sum(p.stat().st_size for p in graph_file.parent.iterdir() if p.is_file() and p.suffix != ".json")
    if size > MAX_BYTES:
        return []
    model = onnx.load(str(graph_file))
    arrays = [numpy_helper.to_array(t) for t in model.graph.initializer if len(t.dims) == 2]
    arrays = [a.astype(np.float32) for a in arrays if a.dtype.kind == "f"]
    layers = loaded.adapter.decoder_layers(loaded.model)
    out = []
    for name, param in layers[layer].named_parameters():
        if param.ndim != 2:
            continue
        w = param.detach().float().cpu().numpy()
        others: dict[str, int] = {}
        for i, other in enumerate(layers):
            if i != layer:
                layout = _layouts(dict(other.named_parameters())[name].detach().float().cpu().numpy(), arrays)
                others[layout] = others.get(layout, 0) + 1
        out.append({"name": name, "layout": _layouts(w, arrays), "others": others})
    return out
