"""Deepstack (Qwen3-VL): which decoder layers got visual features added, from which vision level, to which rows.

Evidence, not configuration: at prefill the hidden state leaving decoder layer L (its forward hook) is compared
with what enters layer L+1 (its pre-hook; the final norm after the last layer). Qwen3-VL adds deepstack features
in between, so the difference is exactly what was added: its rows, its norm relative to the hidden state, and,
matched against the vision tower's deepstack outputs level by level, the vision level it came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class DeepstackRecorder:
    """Hooks on the decoder layers that measure what was added between consecutive layers at prefill."""

    def __init__(self, levels: list[int]):
        self.levels = levels  # vision block index of each deepstack feature list, in the model's order
        self.calls = 0
        self.features = None  # the deepstack features the decoder was handed (a list), CPU
        self.encoded = None  # the vision tower's deepstack features, level by level (rows × dim), CPU
        self.visual_rows: list[int] | None = None
        self.previous = None  # (layer, output hidden state) awaiting the next input
        self.layers: dict[int, dict] = {}

    def decoder_input(self, module, args, kwargs) -> None:
        self.calls += 1
        if self.calls != 1:
            return
        feats = kwargs.get("deepstack_visual_embeds")
        mask = kwargs.get("visual_pos_masks")
        self.features = [f.detach().float().cpu() for f in feats] if feats is not None else None
        self.visual_rows = mask[0].nonzero().flatten().tolist() if mask is not None else None

    def vision_output(self, output) -> None:
        feats = getattr(output, "deepstack_features", None)
        if feats is not None and self.encoded is None:
            self.encoded = [f.detach().float().cpu() for f in feats]

    def layer_output(self, layer: int, output) -> None:
        if self.calls == 1:
            hidden = output[0] if isinstance(output, tuple) else output
            self.previous = (layer, hidden[0].detach().float().cpu().clone())

    def next_input(self, hidden) -> None:
        if self.calls != 1 or self.previous is None:
            return
        layer, before = self.previous
        self.previous = None
        after = hidden[0].detach().float().cpu()
        delta = after - before
        rows = (delta.abs().amax(-1) > 0).nonzero().flatten().tolist()
        self.layers[layer] = addition_record(rows, delta[rows], before[rows].norm() if rows else 0.0, self.encoded, self.levels)

    def attach(self, trace, loaded, prepared) -> None:
        """Per-layer deepstack evidence on each layer stage and in `meta.deepstack` (judged by analysis.detectors.deepstack)."""
        attach_deepstack(trace, self.levels, len(self.features) if self.features is not None else 0, self.layers)


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
        stage = trace.stages.get(f"layer.{layer}")
        if stage is not None:
            stage.summary.deepstack = {k: v for k, v in rec.items() if k != "rows"} | {"rows": len(rec["rows"])}
        per_layer.append({"layer": layer, **rec})
    trace.meta.deepstack = {"levels": levels, "features_handed": features_handed, "layers": per_layer}


@contextmanager
def deepstack_recording(loaded) -> Iterator[DeepstackRecorder | None]:
    """Record deepstack additions for models whose vision tower has deepstack levels (None otherwise)."""
    vision = getattr(loaded.config, "vision_config", None)
    levels = list(getattr(vision, "deepstack_visual_indexes", None) or [])
    if not levels:
        yield None
        return
    adapter = loaded.adapter
    rec = DeepstackRecorder(levels)
    lm = adapter.language_model(loaded.model)
    layers = adapter.decoder_layers(loaded.model)
    handles = [lm.register_forward_pre_hook(rec.decoder_input, with_kwargs=True),
               adapter.vision_tower(loaded.model).register_forward_hook(lambda m, a, out: rec.vision_output(out))]
    for i, layer in enumerate(layers):
        handles.append(layer.register_forward_hook(lambda m, a, out, i=i: rec.layer_output(i, out)))
        if i > 0:
            handles.append(layer.register_forward_pre_hook(lambda m, a, kw: rec.next_input(a[0] if a else kw["hidden_states"]), with_kwargs=True))
    handles.append(lm.norm.register_forward_pre_hook(lambda m, a: rec.next_input(a[0])))
    try:
        yield rec
    finally:
        for h in handles:
            h.remove()
