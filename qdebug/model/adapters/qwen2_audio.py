"""Qwen2-Audio (`Qwen2AudioForConditionalGeneration`): a Whisper-style audio tower, a linear projector, `<|AUDIO|>`.

The `encode` stage is the projector's output (`audios × max rows × dim`, only the rows the feature mask
allows are merged); positions are plain 1-D text positions (no MRoPE).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Adapter
from .encoders import Encoder
from .forward_merge import audio_rows_for_frames, embeds_at_decoder


@dataclass(frozen=True)
class Qwen2AudioAdapter(Adapter):
    """Where Qwen2-Audio keeps its stages."""

    def model_class(self):
        from transformers import Qwen2AudioForConditionalGeneration

        return Qwen2AudioForConditionalGeneration

    def vision_tower(self, model):
        # The rows that reach the decoder are the projector's output: that is what `encode` records.
        return model.model.multi_modal_projector

    def audio_tower(self, model):
        """The Whisper-style encoder (its `_get_feat_extract_output_lengths` maps mask frames to rows)."""
        return model.model.audio_tower

    def image_token_id(self, config) -> int:
        return int(config.audio_token_id)

    def merge_size(self, config) -> int:
        return 1

    def rows_for_frames(self, model, frames: int) -> int:
        """Encoder rows the model keeps for `frames` unmasked feature frames (the model's own formula)."""
        return audio_rows_for_frames(self.audio_tower(model), frames)

    def merged_embeddings(self, model, inputs: dict):
        """`inputs_embeds` exactly as the model's own forward merges them: run it and stop at the decoder's door."""
        return embeds_at_decoder(self.language_model(model), lambda: model.model(
            input_ids=inputs["input_ids"], input_features=inputs.get("input_features"),
            attention_mask=inputs.get("attention_mask"), feature_attention_mask=inputs.get("feature_attention_mask")))


ADAPTER = Qwen2AudioAdapter(name="Qwen2AudioForConditionalGeneration", model_types=("qwen2_audio",), modality="audio",
                            declared_encoders=(Encoder("audio", "audio_token_id", "model.multi_modal_projector"),))
