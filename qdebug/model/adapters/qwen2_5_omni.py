"""Qwen2.5-Omni's thinker (`Qwen2_5OmniThinkerForConditionalGeneration`): a vision tower for images and video, a
Whisper-style audio tower, and a decoder whose MRoPE interleaves a video's audio with its frames in time.

A full Omni checkpoint (`qwen2_5_omni`: thinker, talker and token2wav) is loaded without its speech output and its
thinker is what qdebug traces; a thinker-only checkpoint (`qwen2_5_omni_thinker`) loads as it is.

Two thinker layouts are in the transformers range: from 5.21 the towers, `get_rope_index` and the decoder sit under
`model.model` (`visual`, `audio_tower`, `language_model`); before, the towers and `get_rope_index` sit on the thinker
itself and `model.model` is the decoder. Each accessor reads which one the loaded model has (`module_at`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Adapter
from .encoders import Encoder, module_at
from .forward_merge import audio_rows_for_frames, embeds_at_decoder


class _ThinkerLoader:
    """`from_pretrained` for either checkpoint layout, returning the thinker."""

    @staticmethod
    def from_pretrained(path, **kwargs):
        from transformers import AutoConfig, Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniThinkerForConditionalGeneration

        config = AutoConfig.from_pretrained(path, local_files_only=kwargs.get("local_files_only", True),
                                           trust_remote_code=kwargs.get("trust_remote_code", False))
        if config.model_type == "qwen2_5_omni_thinker":
            return Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path, **kwargs)
        config.enable_audio_output = False  # no talker or token2wav: the thinker writes the text qdebug traces
        return Qwen2_5OmniForConditionalGeneration.from_pretrained(path, config=config, **kwargs).thinker

    @staticmethod
    def from_config(config, **kwargs):
        """The thinker built from a config (a full Omni config's `thinker_config`), e.g. on the meta device."""
        from transformers import Qwen2_5OmniThinkerForConditionalGeneration

        thinker = getattr(config, "thinker_config", None) or config
        return Qwen2_5OmniThinkerForConditionalGeneration._from_config(thinker, **kwargs)


@dataclass(frozen=True)
class Qwen2_5OmniAdapter(Adapter):
    """Where Qwen2.5-Omni's thinker keeps its stages."""

    def model_class(self):
        return _ThinkerLoader

    def vision_tower(self, model):
        """The vision encoder for images and video (`model.model.visual`, or the thinker's own before 5.21)."""
        return module_at(model, "model.visual")

    def language_model(self, model):
        """The decoder: `model.model.language_model`, or `model.model` itself where that is the decoder (before 5.21)."""
        inner = model.model
        return getattr(inner, "language_model", inner)

    def audio_tower(self, model):
        """The Whisper-style audio encoder (its `_get_feat_extract_output_lengths` maps mask frames to rows)."""
        return module_at(model, "model.audio_tower")

    def image_token_id(self, config) -> int:
        return int(config.image_token_index)

    def video_token_id(self, config) -> int:
        """Id of the per-row video placeholder token (`<|VIDEO|>`)."""
        return int(config.video_token_index)

    def audio_token_id(self, config) -> int:
        """Id of the per-row audio placeholder token (`<|AUDIO|>`)."""
        return int(config.audio_token_index)

    def rows_for_frames(self, model, frames: int) -> int:
        """Audio rows the model keeps for `frames` unmasked feature frames (the model's own formula)."""
        return audio_rows_for_frames(self.audio_tower(model), frames)

    def media_rope_index(self, model, inputs: dict, use_audio_in_video: bool | None = None):
        """MRoPE ids for images, video (time-aligned with its audio when the inputs say `use_audio_in_video`, or the
        argument overrides them) and audio, from the model's own `get_rope_index`."""
        if use_audio_in_video is None:
            use_audio_in_video = bool(inputs.get("use_audio_in_video"))
        mask = inputs.get("feature_attention_mask")
        return module_at(model, "model.get_rope_index")(  # beside the towers: under model.model, or the thinker's own
            inputs["input_ids"], image_grid_thw=inputs.get("image_grid_thw"), video_grid_thw=inputs.get("video_grid_thw"),
            attention_mask=inputs["attention_mask"], use_audio_in_video=use_audio_in_video,
            audio_seqlens=mask.sum(-1) if mask is not None else None, second_per_grids=inputs.get("video_second_per_grid"),
        )

    def merged_embeddings(self, model, inputs: dict):
        """`inputs_embeds` exactly as the thinker's own forward merges every modality: run it, stop at the decoder."""
        return embeds_at_decoder(self.language_model(model), lambda: model(**{k: v for k, v in inputs.items() if k != "mm_token_type_ids"}))


ADAPTER = Qwen2_5OmniAdapter(
    name="Qwen2_5OmniThinkerForConditionalGeneration", model_types=("qwen2_5_omni_thinker", "qwen2_5_omni"), mixed_media=True,
    declared_encoders=(Encoder("image", "image_token_index", "model.visual", "image_grid_thw"),
                       Encoder("audio", "audio_token_index", "model.audio_tower"),
                       Encoder("video", "video_token_index", "model.visual", "video_grid_thw")),
)
