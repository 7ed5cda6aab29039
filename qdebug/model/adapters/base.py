"""Adapter: where an architecture keeps each pipeline stage, and its token/position conventions."""

from __future__ import annotations

from dataclasses import dataclass

from .encoders import Encoder


@dataclass(frozen=True)
class Adapter:
    """Architecture-specific knowledge, so nothing else names a module path.

    Subclasses override the accessors whose paths differ; the defaults fit the Qwen-VL family in
    transformers 5.x (`model.model.visual`, `model.model.language_model`, `model.lm_head`).
    """

    name: str
    model_types: tuple[str, ...]
    modality: str = "image"
    # Encoders this architecture has (see `Encoder`); empty means the Qwen-VL default of `encoders()`.
    declared_encoders: tuple[Encoder, ...] = ()
    # Whether one request may carry several modalities at once, each traced at its own encoder (Qwen2.5-Omni).
    mixed_media: bool = False
    # Where vLLM's implementation of the architecture keeps its decoder layers and final norm (engine/vllm_model.py):
    # the first dotted path that exists under vLLM's model wins.
    engine_layer_paths: tuple[str, ...] = ("language_model.model.layers", "model.layers", "language_model.layers")
    engine_norm_paths: tuple[str, ...] = ("language_model.model.norm", "model.norm", "language_model.norm")

    def encoders(self) -> tuple[Encoder, ...]:
        """The encoders: declared, else the Qwen-VL pair (images and video through `model.model.visual`)."""
        return self.declared_encoders or (Encoder("image", "image_token_id", "model.visual", "image_grid_thw"),
                                           Encoder("video", "video_token_id", "model.visual", "video_grid_thw"))

    def model_class(self):
        """The transformers class that loads this architecture."""
        from transformers import AutoModelForImageTextToText

        return AutoModelForImageTextToText

    def vision_tower(self, model):
        """The vision encoder module (its output's `pooler_output` is the merged rows)."""
        return model.model.visual

    def language_model(self, model):
        """The decoder stack module (receives the merged `inputs_embeds` and position ids)."""
        return model.model.language_model

    def decoder_layers(self, model):
        """The decoder layers, in order."""
        return list(self.language_model(model).layers)

    def lm_head(self, model):
        """The output projection to vocabulary logits."""
        return model.lm_head

    def embed_tokens(self, model):
        """The token embedding table."""
        return model.get_input_embeddings()

    def image_token_id(self, config) -> int:
        """Id of the per-row image placeholder token (`<|image_pad|>`)."""
        return int(config.image_token_id)

    def merge_size(self, config) -> int:
        """Spatial merge factor between vision patches and LLM tokens."""
        return int(config.vision_config.spatial_merge_size)

    def text_config(self, config):
        """The decoder's config (heads, KV heads, head dim, layers)."""
        return config.text_config

    def media_rope_index(self, model, inputs: dict):
        """MRoPE (t, h, w) position ids `3 × batch × seq` and rope deltas for whatever media the processor gave (image and
        video grids, Qwen2.5-VL's `second_per_grid_ts`), from the model's own `get_rope_index`."""
        grids = {k: inputs[k] for k in ("image_grid_thw", "video_grid_thw", "second_per_grid_ts") if inputs.get(k) is not None}
        return model.model.get_rope_index(inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"],
                                          attention_mask=inputs["attention_mask"], **grids)

    def merged_embeddings(self, model, inputs: dict):
        """`inputs_embeds` (1 × seq × dim) built the way the model's forward builds them: token embeddings with
        each image's encoder rows scattered into its placeholders, using the model's own helpers."""
        import torch

        embeds = self.embed_tokens(model)(inputs["input_ids"])
        if inputs.get("pixel_values") is not None:
            features = model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"], return_dict=True)
            rows = torch.cat(features.pooler_output, dim=0).to(embeds.device, embeds.dtype)
            mask, _ = model.model.get_placeholder_mask(inputs["input_ids"], inputs_embeds=embeds, image_features=rows)
            embeds = embeds.masked_scatter(mask, rows)
        if inputs.get("pixel_values_videos") is not None:  # a video's rows go to its `<|video_pad|>` placeholders
            features = model.model.get_video_features(inputs["pixel_values_videos"], inputs["video_grid_thw"], return_dict=True)
            rows = torch.cat(features.pooler_output, dim=0).to(embeds.device, embeds.dtype)
            _, mask = model.model.get_placeholder_mask(inputs["input_ids"], inputs_embeds=embeds, video_features=rows)
            embeds = embeds.masked_scatter(mask, rows)
        return embeds

    def layer_types(self, config) -> list[str] | None:
        """The kind of each decoder layer (`full_attention`, `linear_attention`) for hybrid decoders; None when every
        layer is softmax attention (then nothing linear is recorded, watched or injected)."""
        return None

    def linear_kernel_module(self) -> str | None:
        """The module whose gated-delta-rule functions qdebug taps (hybrid decoders only)."""
        return None

    def linear_dims(self, config) -> dict | None:
        """Key/value head counts and head dims of the linear-attention layers (hybrid decoders only)."""
        return None

    def head_dim(self, config) -> int:
        """Per-head width of the decoder attention."""
        text = self.text_config(config)
        return int(getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads)
