"""Qwen2-Audio (`Qwen2AudioForConditionalGeneration`): a Whisper-style audio tower, a linear projector, `<|AUDIO|>`.

The `encode` stage is the projector's output (`audios × max rows × dim`, only the rows the feature mask
allows are merged); positions are plain 1-D text positions (no MRoPE).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Adapter
from .encoders import Encoder


class _Merged(Exception):
    """Raised by a one-shot hook to stop the forward once the merged embeddings exist."""

    def __init__(self, embeds):
        super().__init__("merged")
        self.embeds = embeds


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
        import torch

        _, rows = self.audio_tower(model)._get_feat_extract_output_lengths(torch.tensor([frames]))
        return int(rows[0])

    def rope_index(self, model, input_ids, mm_token_type_ids, image_grid_thw, attention_mask):
        raise NotImplementedError("Qwen2-Audio uses 1-D text positions")

    def merged_embeddings(self, model, inputs: dict):
        """`inputs_embeds` exactly as the model's own forward merges them: run it and stop at the decoder's door."""
        language_model = self.language_model(model)

        def stop(module, args, kwargs):
            raise _Merged(kwargs["inputs_embeds"])

        # prepend: stop before any other pre-hook (a recorder) counts this as a decoder call.
        handle = language_model.register_forward_pre_hook(stop, with_kwargs=True, prepend=True)
        try:
            model.model(
                input_ids=inputs["input_ids"],
                input_features=inputs.get("input_features"),
                attention_mask=inputs.get("attention_mask"),
                feature_attention_mask=inputs.get("feature_attention_mask"),
            )
        except _Merged as merged:
            return merged.embeds
        finally:
            handle.remove()
        raise RuntimeError("the model's forward never reached its decoder")


ADAPTER = Qwen2AudioAdapter(name="Qwen2AudioForConditionalGeneration", model_types=("qwen2_audio",), modality="audio",
                            declared_encoders=(Encoder("audio", "audio_token_id", "model.multi_modal_projector"),))
