"""What a checkpoint's config.json says about its decoder (layers, heads, context), read without loading weights."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.errors import InputError


@dataclass
class DecoderLimits:
    """Counts that options like --layer/--head are checked against before any weights load."""

    num_layers: int | None
    num_heads: int | None
    context: int | None  # max_position_embeddings


def _int(section: dict, key: str) -> int | None:
    value = section.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def decoder_limits(spec: str) -> DecoderLimits:
    """Resolve `--model` and read its decoder's sizes from config.json (ModelLoadError when it is not a model)."""
    from .adapters import adapter_for
    from .load import read_config, resolve_model_dir

    path = resolve_model_dir(spec)
    config = read_config(path)
    adapter_for(config, where=f"--model {spec}")
    text_config = config.get("text_config")
    text = text_config if isinstance(text_config, dict) else config
    return DecoderLimits(_int(text, "num_hidden_layers"), _int(text, "num_attention_heads"), _int(text, "max_position_embeddings"))


def check_index(option: str, value: int | None, count: int | None, what: str) -> None:
    """InputError unless `value` is None or in 0..count-1."""
    if value is None:
        return
    if value < 0 or (count is not None and value >= count):
        expected = f"0..{count - 1}" if count is not None else "a non-negative index"
        raise InputError(f"{option} {value}: expected {expected} ({what})")
