"""Build an untrained demo Qwen2-VL model and its processor from the demo vocabulary."""

from __future__ import annotations

from .vocab import build_tokenizer

# Pixel bounds: every scene (84..224 px a side) passes through unresized; larger images shrink to ≤ 64 tokens.
MIN_PIXELS = 56 * 56
MAX_PIXELS = 224 * 224


def build_processor():
    """A real `Qwen2VLProcessor` with the demo tokenizer and chat template."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    tokenizer = build_tokenizer()
    return Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS),
        chat_template=tokenizer.chat_template,
    )


def build_config(tokenizer):
    """A small `Qwen2VLConfig`: 4 decoder layers (4 heads, 2 KV heads), a 2-block vision tower."""
    from transformers import Qwen2VLConfig

    ids = tokenizer.convert_tokens_to_ids
    vocab_size = (len(tokenizer) + 7) // 8 * 8
    return Qwen2VLConfig(
        text_config=dict(
            vocab_size=vocab_size,
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]},
            bos_token_id=ids("<|endoftext|>"),
            eos_token_id=ids("<|im_end|>"),
            pad_token_id=ids("<|endoftext|>"),
        ),
        vision_config=dict(
            depth=2,
            embed_dim=64,
            hidden_size=128,
            mlp_ratio=2,
            num_heads=4,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
