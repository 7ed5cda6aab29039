"""The two graphs an export is split into, as torch modules around the model's own submodules.

Grid-dependent tensors (vision rotary position ids, deepstack interpolation indices) are computed outside the
graph with transformers' own `vision_utils` helpers and fed as inputs, as real exports do: inside a graph they
are data-dependent (`.tolist()` over `grid_thw`) and torch.export cannot trace them. One call of the vision
graph encodes one image (one attention segment), so `cu_seqlens` comes from the input's shape.
"""

from __future__ import annotations

import torch


def vision_precompute(visual, grid_thw) -> dict:
    """Grid-dependent vision inputs for one image (`grid_thw` 1 × 3), keyed by manifest role."""
    from transformers import vision_utils

    out = {"vision_position_ids": vision_utils.get_vision_position_ids(grid_thw, visual.spatial_merge_size)}
    if hasattr(visual, "pos_embed") and hasattr(visual, "num_grid_per_side"):  # Qwen3-VL: learned positions, interpolated
        indices, weights = vision_utils.get_vision_interpolation_indices_and_weights(
            grid_thw, num_grid_per_side=visual.num_grid_per_side, mode=visual.interpolation_mode,
            align_corners=visual.interpolation_align_corners, spatial_merge_size=visual.config.spatial_merge_size,
        )
        out["interp_indices"], out["interp_weights"] = indices, weights
    return out


class VisionGraph(torch.nn.Module):
    """pixel_values (patches × C·T·P·P) + precomputed positions → merged rows (rows × dim) [+ deepstack rows]."""

    def __init__(self, visual, extra_inputs: tuple[str, ...]):
        super().__init__()
        self.visual = visual
        self.extra_inputs = extra_inputs

    def forward(self, pixel_values, *extra):
        n = pixel_values.shape[0]
        cu_seqlens = torch.stack([torch.zeros((), dtype=torch.int64), torch.full((), n, dtype=torch.int64)]).to(torch.int32)
        kwargs = {("position_ids" if k == "vision_position_ids" else k): v for k, v in zip(self.extra_inputs, extra)}
        out = self.visual(pixel_values, grid_thw=None, cu_seqlens=cu_seqlens, max_seqlen=n, **kwargs)
        return (out.pooler_output, *(getattr(out, "deepstack_features", None) or []))


class PrefillGraph(torch.nn.Module):
    """inputs_embeds (1 × S × D) + MRoPE position ids (3 × 1 × S) + mask (1 × S) [+ deepstack] → logits, layer outputs.

    `text_positions`: the graph takes 1 × S text positions and repeats them for t, h and w (the
    `mrope-text-only` fault). `drop_deepstack`: the graph takes no deepstack inputs (the `drop-deepstack` fault).
    """

    def __init__(self, model, adapter, deepstack: int = 0, text_positions: bool = False, drop_deepstack: bool = False):
        super().__init__()
        self.lm = adapter.language_model(model)
        self.head = adapter.lm_head(model)
        self.layers = adapter.decoder_layers(model)
        self.deepstack = 0 if drop_deepstack else deepstack
        self.text_positions = text_positions

    def forward(self, inputs_embeds, position_ids, attention_mask, *deepstack):
        if self.text_positions:
            position_ids = position_ids[None].expand(3, *position_ids.shape)
        outs: list = []
        handles = [layer.register_forward_hook(lambda m, a, o: outs.append(o[0] if isinstance(o, tuple) else o)) for layer in self.layers]
        kwargs = {}
        if self.deepstack:
            visual_pos_masks, *rows = deepstack
            kwargs = {"visual_pos_masks": visual_pos_masks, "deepstack_visual_embeds": list(rows)}
        try:
            hidden = self.lm(inputs_embeds=inputs_embeds, position_ids=position_ids, attention_mask=attention_mask,
                             use_cache=False, **kwargs).last_hidden_state
        finally:
            for h in handles:
                h.remove()
        return (self.head(hidden), *outs)
