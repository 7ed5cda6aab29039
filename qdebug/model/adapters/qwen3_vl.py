"""Qwen3-VL (`Qwen3VLForConditionalGeneration`): Qwen2-VL's layout plus deepstack visual features.

The vision tower's `pooler_output` is the merged rows (the `encode` stage); its `deepstack_features` are added
to the hidden states after the first decoder layers. A plain `inputs_embeds` path carries no deepstack
features, so `diff --vary paths` on Qwen3-VL shows where that path drops them.
"""

from .base import Adapter

ADAPTER = Adapter(name="Qwen3VLForConditionalGeneration", model_types=("qwen3_vl",))
