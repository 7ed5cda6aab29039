"""The sampled `encoder_batch` check: an item of an encoder call that carried two or more items, re-encoded alone.

Where it listens: `model.embed_multimodal` (wrapped inside the batch recorder's wrapper, which knows the call's
(request, item) pairs: `BatchRecorder.items`, in the order vLLM hands them to the encoder). A sampled call of ≥ 2
items gives one item, chosen at random, a shadow call through the same encoder with that item's own slice of the
call's inputs (`pixel_values` rows and its `*_grid_thw` row), under `torch.no_grad`; its rows are compared with the
rows the batched call gave it. The batched outputs are returned untouched, and the shadow's rows are dropped.
"""

from __future__ import annotations

from qdebug.vocab import StageName, WatchCheck

from .watch_registry import Need, Point, WatchEntry, register

# the encoder's inputs per modality: flat patch rows (t·h·w of each item, concatenated) and one grid row per item
INPUTS = {"image": ("pixel_values", "image_grid_thw"), "video": ("pixel_values_videos", "video_grid_thw")}
TOLERANCE = 0.05  # a row's L2 difference over its norm: float noise is ~1e-6 (float32) to ~1e-2 (bfloat16)


def item_inputs(kwargs: dict, modality: str, k: int) -> dict | None:
    """The encoder inputs of item `k` alone (the call's own tensors, sliced), or None for inputs this check cannot split."""
    keys = INPUTS.get(modality)
    if keys is None or keys[0] not in kwargs or keys[1] not in kwargs:
        return None
    pixels, grid = kwargs[keys[0]], kwargs[keys[1]]
    if not hasattr(pixels, "shape") or not hasattr(grid, "shape") or grid.ndim != 2 or pixels.ndim != 2:
        return None
    sizes = [int(t) * int(h) * int(w) for t, h, w in grid.tolist()]
    if sum(sizes) != pixels.shape[0] or not 0 <= k < len(sizes):
        return None
    start = sum(sizes[:k])
    return {keys[0]: pixels[start:start + sizes[k]], keys[1]: grid[k:k + 1]}


def row_difference(alone, batched) -> float:
    """The largest per-row L2 difference of two row blocks (rows × dim) over the batched row's norm; inf when the
    shapes differ."""
    a, b = alone.float().reshape(-1, alone.shape[-1]), batched.float().reshape(-1, batched.shape[-1])
    if a.shape != b.shape:
        return float("inf")
    return float(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).max()) if a.shape[0] else 0.0


@register
class EncoderBatchEntry(WatchEntry):
    """The check's entry: at install, the model's encoder call wrapped (when the model has one)."""

    check = WatchCheck.ENCODER_BATCH
    point = Point.ENCODER
    sampled = True  # its own draw per encoder call, not the step's
    needs = frozenset({Need.ENCODER_CALL})
    stage = StageName.ENCODE

    def applies(self) -> bool:
        return hasattr(self.watcher.runner.model, "embed_multimodal")

    def install(self) -> None:
        if self.applies():  # inside the batch recorder's wrapper (it names the items)
            model = self.watcher.runner.model
            model.embed_multimodal = EncoderBatchCheck(self.watcher, model.embed_multimodal)


class EncoderBatchCheck:
    """Wraps the model's encoder call; a sampled call of ≥ 2 items runs the check through the watcher (counted, timed,
    errors swallowed)."""

    def __init__(self, watcher, embed) -> None:
        self.watcher, self.embed = watcher, embed

    def __call__(self, *args, **kwargs):
        """The encoder call, unchanged; the check after it on a sampled call."""
        out = self.embed(*args, **kwargs)
        watcher = self.watcher
        with watcher.clock:
            if watcher.settings.sample > 0 and not args and len(out) >= 2 and watcher.rng.random() < watcher.settings.sample:
                items = self._items(len(out))
                if items:
                    watcher.flight.open = True  # before the step's decoder: its requests can be traced from their first row
                    try:
                        watcher.run(WatchCheck.ENCODER_BATCH, items[0][1], self.check, kwargs, out, items)
                    finally:
                        watcher.flight.open = False
        return out

    def _items(self, count: int) -> list[tuple[str, str, int]] | None:
        """(modality, request, item) of each output of this call, from the batch recorder; None when it has none."""
        recorder = getattr(getattr(self.watcher.runner, "_qdebug_tracer", None), "batches", None)
        items = getattr(recorder, "items", None) if recorder is not None and not recorder.broken else None
        return list(items[:count]) if items and len(items) >= count else None

    def check(self, kwargs: dict, out, items: list[tuple[str, str, int]]) -> list:
        """Re-encode one item alone; a violation when its rows differ from its batched rows beyond TOLERANCE."""
        import torch

        k = self.watcher.rng.randrange(len(items))
        modality, rid, index = items[k]
        inputs = item_inputs(kwargs, modality, k)
        if inputs is None:
            raise ValueError(f"the {modality} encoder call's inputs ({', '.join(sorted(kwargs))}) do not split into its {len(items)} items")
        with torch.no_grad():
            alone = self.embed(**inputs)
        if len(alone) != 1:
            raise ValueError(f"item {index} of {rid} encoded alone gave {len(alone)} outputs (expected 1)")
        difference = row_difference(alone[0], out[k])
        del alone
        if difference <= TOLERANCE:
            return []
        others = [(r, i) for j, (_, r, i) in enumerate(items) if j != k]
        partners = ", ".join(f"{r} item {i}" for r, i in others)
        evidence = (f"item {index} ({modality}) of {rid}, encoded in one call with {len(others)} other item(s): encoded alone, "
                    f"its {int(out[k].reshape(-1, out[k].shape[-1]).shape[0])} rows differ from its batched rows by up to "
                    f"{difference:.3g} of a row's norm (tolerance {TOLERANCE}); the call's other items: {partners}")
        finding = self.watcher.finding(WatchCheck.ENCODER_BATCH, rid, self.watcher.runner.requests.get(rid), evidence, [],
                                        list(dict.fromkeys(r for r, _ in others)))
        return [finding]
