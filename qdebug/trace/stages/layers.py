"""`layer.N`: each decoder layer's output statistics, kept rows and attention weights."""

from __future__ import annotations

from qdebug.vocab import FindingKind, layer_stage

from ..schema import Check, Stage
from ..stats import tensor_stats
from ..summaries import LayerSummary, TensorStats
from ..tensor_names import TensorKind as T, tensor_name


def layer_stages(rec, n_layers: int, tensors: dict) -> dict[str, Stage]:
    """One stage per recorded layer (every layer of the model when none was recorded)."""
    return {layer_stage(n): _layer(rec, n, tensors) for n in sorted(set(rec.hidden) | set(rec.hidden_stats)) or range(n_layers)}


def _layer(rec, layer: int, tensors: dict) -> Stage:
    import torch

    summary, checks = LayerSummary(layer=layer), []
    st = rec.hidden_stats.get(layer)
    if layer in rec.hidden:
        tensors[tensor_name(T.LAYER_HIDDEN, layer=layer)] = rec.hidden[layer]
        st = st or tensor_stats(rec.hidden[layer])
    if layer in rec.hidden_kept:
        tensors[tensor_name(T.LAYER_LAST, layer=layer)] = rec.hidden_kept[layer]  # the last prompt row (rows × dim)
    if st is not None:
        summary.stats = TensorStats(**st)
        checks.append(Check("no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf", FindingKind.NAN_INF))
    if rec.step_hidden.get(layer):
        tensors[tensor_name(T.LAYER_STEP_HIDDEN, layer=layer)] = torch.stack(rec.step_hidden[layer])
    if rec.attn.get(layer):
        attn = torch.cat(rec.attn[layer], dim=1)
        tensors[tensor_name(T.LAYER_ATTN, layer=layer)] = attn
        summary.attn_shape = list(attn.shape)
    return Stage(layer_stage(layer), summary, checks)
