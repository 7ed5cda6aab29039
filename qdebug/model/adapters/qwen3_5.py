"""Qwen3.5 (`Qwen3_5ForConditionalGeneration`): Qwen3-VL's layout with a hybrid decoder.

Decoder layers are either `self_attn` (softmax attention through the AttentionInterface, as in the other
families) or `linear_attn` (`Qwen3_5GatedDeltaNet`: the gated delta rule through the module-level functions
`torch_chunk_gated_delta_rule` / `torch_recurrent_gated_delta_rule` of the modeling module), by
`config.text_config.layer_types`. Linear-attention layers have no attention matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Adapter

# The modeling module whose gated-delta-rule functions qdebug taps (qdebug.model.linear_attention).
LINEAR_KERNEL_MODULE = "transformers.models.qwen3_5.modeling_qwen3_5"


@dataclass(frozen=True)
class Qwen3_5Adapter(Adapter):
    """Where Qwen3.5 keeps its stages, and which decoder layers are linear attention."""

    def layer_types(self, config) -> list[str]:
        """`linear_attention` or `full_attention` per decoder layer."""
        return list(self.text_config(config).layer_types)

    def linear_kernel_module(self) -> str:
        """The module holding the gated-delta-rule kernel functions."""
        return LINEAR_KERNEL_MODULE

    def linear_dims(self, config) -> dict:
        """Key/value head counts and head dims of the linear-attention layers."""
        text = self.text_config(config)
        return {"key_heads": int(text.linear_num_key_heads), "value_heads": int(text.linear_num_value_heads),
                "key_dim": int(text.linear_key_head_dim), "value_dim": int(text.linear_value_head_dim)}


ADAPTER = Qwen3_5Adapter(name="Qwen3_5ForConditionalGeneration", model_types=("qwen3_5",))
