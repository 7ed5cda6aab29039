"""Sanity of a config.json's sizes (counts are positive integers that divide as the layers need), checked before any
model is built, so a hostile or broken config is one line rather than a ZeroDivisionError deep in transformers."""

from __future__ import annotations

import json

from qdebug.errors import ModelLoadError

SECTIONS = ("text_config", "vision_config", "audio_config")
LAYER_KEYS = ("num_hidden_layers", "depth", "encoder_layers")
COUNT_KEYS = (
    *LAYER_KEYS, "num_attention_heads", "num_key_value_heads", "hidden_size", "intermediate_size", "head_dim", "vocab_size",
    "embed_dim", "num_heads", "patch_size", "spatial_merge_size", "temporal_patch_size", "out_hidden_size", "in_channels",
    "d_model", "encoder_attention_heads", "encoder_ffn_dim", "num_mel_bins", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
)
# Far beyond any published checkpoint, low enough that building the architecture (even on the meta device) stays quick.
MAX_LAYERS = 10_000
MAX_SIZE = 1 << 24
MAX_CONTEXT = (1 << 31) - 1


def _bad_count(value, limit: int) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit


def _check_counts(section: dict, prefix: str, file: str) -> None:
    keys = [*COUNT_KEYS, "max_position_embeddings"]
    for key in keys:
        value = section.get(key)
        if value is None:
            continue  # absent: transformers' default for the architecture applies
        limit = MAX_LAYERS if key in LAYER_KEYS else MAX_CONTEXT if key == "max_position_embeddings" else MAX_SIZE
        if _bad_count(value, limit):
            raise ModelLoadError(f"{file}: {prefix}{key} is {json.dumps(value)[:60]}; expected a whole number from 1 to {limit:,}")


def _check_divides(section: dict, prefix: str, file: str, part: str, whole: str) -> None:
    a, b = section.get(part), section.get(whole)
    if isinstance(a, int) and isinstance(b, int) and b % a:
        raise ModelLoadError(f"{file}: {prefix}{whole} {b} is not a multiple of {prefix}{part} {a}; expected it to divide evenly")


def check_config(raw: dict, file: str) -> None:
    """ModelLoadError (one line, naming the field and value as written) for a config whose sizes no model can have."""
    sections = [(raw, "")]
    for name in SECTIONS:
        if name in raw:
            value = raw[name]
            if not isinstance(value, dict):
                kind = "null" if value is None else "a list" if isinstance(value, list) else json.dumps(value)[:60]
                raise ModelLoadError(f"{file}: {name} is {kind}; expected an object of the {name.split('_')[0]} model's settings")
            sections.append((value, f"{name}."))
    for section, prefix in sections:
        _check_counts(section, prefix, file)
        _check_divides(section, prefix, file, "num_key_value_heads", "num_attention_heads")
        _check_divides(section, prefix, file, "linear_num_key_heads", "linear_num_value_heads")
        _check_divides(section, prefix, file, "encoder_attention_heads", "d_model")
        if prefix == "vision_config.":  # Qwen2-VL names the tower's width embed_dim (its hidden_size is the merger's)
            _check_divides(section, prefix, file, "num_heads", "embed_dim" if "embed_dim" in section else "hidden_size")
