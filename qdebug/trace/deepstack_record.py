"""Deepstack (Qwen3-VL): which decoder layers got visual features added, from which vision level, to which rows.

Evidence, not configuration: at prefill the hidden state leaving decoder layer L (its forward hook) is compared
with what enters layer L+1 (its pre-hook; the final norm after the last layer). Qwen3-VL adds deepstack features
in between, so the difference is exactly what was added: its rows, its norm relative to the hidden state, and,
matched against the vision tower's deepstack outputs level by level, the vision level it came from.
"""

from __future__ import annotations

from typing import Any

from qdebug.vocab import layer_stage

from .hooks import to_cpu
from .protocols import FamilySink


class DeepstackRecorder(FamilySink):
    """Measures what was added between consecutive decoder layers at prefill, fed by the thread's Recorder.

    Memory on the model's device: one layer's output (seq × dim) until the next layer's input arrives; what
    crosses to CPU is only the added rows (and the tower's deepstack features once).
    """

    def __init__(self, levels: list[int]):
        self.levels = levels  # vision block index of each deepstack feature list, in the model's order
        self.features_handed = 0  # how many deepstack feature lists the decoder was handed
        self.encoded: list[Any] | None = None  # the vision tower's deepstack features, level by level (rows × dim), CPU
        self.previous: tuple[int, Any] | None = None  # (layer, output hidden state, on its device) awaiting the next input
        self.layers: dict[int, dict] = {}

    def decoder_input(self, args, kwargs) -> None:
        feats = kwargs.get("deepstack_visual_embeds")
        self.features_handed = len(feats) if feats is not None else 0

    def vision_output(self, output) -> None:
        feats = getattr(output, "deepstack_features", None)
        if feats is not None and self.encoded is None:
            self.encoded = [to_cpu(f).float() for f in feats]

    def layer_output(self, layer: int, output) -> None:
        hidden = output[0] if isinstance(output, tuple) else output
        self.previous = (layer, hidden[0].detach().clone())

    def layer_input(self, layer: int, hidden) -> None:
        if self.previous is None:
            return
        before_layer, before = self.previous
        self.previous = None
        delta = hidden[0].detach().float() - before.float()  # on the layer's device: only the added rows leave it
        rows = (delta.abs().amax(-1) > 0).nonzero().flatten().tolist()
        added = to_cpu(delta[rows]).float()
        before_norm = float(before[rows].float().norm()) if rows else 0.0
        self.layers[before_layer] = addition_record(rows, added, before_norm, self.encoded, self.levels)

    def attach(self, trace, loaded, prepared) -> None:
        """Per-layer deepstack evidence on each layer stage and in `meta.deepstack` (judged by analysis.detectors.deepstack)."""
        attach_deepstack(trace, self.levels, self.features_handed, self.layers)


def addition_record(rows: list[int], added, before_norm, encoded, levels: list[int]) -> dict:
    """What was added after one layer: its rows (prompt positions), its norm relative to the hidden state there
    (`before_norm`: the norm of those rows before the addition), and the vision level it matches best."""
    rec = {"added": bool(rows), "rows": list(rows), "relative_norm": 0.0, "level": None, "match": None}
    if rows:
        rec["relative_norm"] = float(added.norm() / (before_norm + 1e-12))
        rec["level"], rec["match"] = level_of(added, encoded, levels)
    return rec


def level_of(added, encoded, levels: list[int]) -> tuple[int | None, float | None]:
    """The vision level whose encoder features equal what was added (best cosine), as the tower produced them."""
    import torch

    best, score = None, -2.0
    for i, feat in enumerate(encoded or []):
        if feat.shape == added.shape:
            cos = float(torch.nn.functional.cosine_similarity(feat.flatten().float(), added.flatten().float(), dim=0))
            if cos > score:
                best, score = i, cos
    return (levels[best] if best is not None and best < len(levels) else None), (score if best is not None else None)


def attach_deepstack(trace, levels: list[int], features_handed: int, layers: dict[int, dict]) -> None:
    """Put per-layer deepstack evidence on each layer stage and in `meta.deepstack` (local and engine traces alike)."""
    per_layer = []
    for layer in sorted(layers):
        rec = layers[layer]
        stage = trace.stages.get(layer_stage(layer))
        if stage is not None:
            stage.summary.deepstack = {k: v for k, v in rec.items() if k != "rows"} | {"rows": len(rec["rows"])}
        per_layer.append({"layer": layer, **rec})
    trace.meta.deepstack = {"levels": levels, "features_handed": features_handed, "layers": per_layer}


def deepstack_recorder(loaded) -> DeepstackRecorder | None:
    """A deepstack recorder for models whose vision tower has deepstack levels (None otherwise)."""
    vision = getattr(loaded.config, "vision_config", None)
    levels = list(getattr(vision, "deepstack_visual_indexes", None) or [])
    return DeepstackRecorder(levels) if levels else None
