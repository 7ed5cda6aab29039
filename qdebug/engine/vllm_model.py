"""Where a vLLM model keeps the parts qdebug hooks: decoder layers, final norm, a linear-attention projection's blocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qdebug.model.adapters import Adapter


@dataclass(frozen=True)
class ModelConfigs:
    """The parts of a checkpoint's config the engine trace needs: the model served, its text, vision and audio
    configs, its placeholder ids."""

    architecture: str | None  # Qwen2.5-Omni: the thinker's (vLLM serves the thinker, as transformers loads it)
    text: object
    vision: object | None
    audio: object | None
    image_token_id: int | None
    video_token_id: int | None
    audio_token_id: int | None


def model_configs(cfg: object) -> ModelConfigs:
    """`cfg`'s configs, from its `thinker_config` when it has one (Qwen2.5-Omni), else from `cfg` itself; a
    placeholder id is `<name>_token_id` or `<name>_token_index` (Qwen2-Audio, Omni)."""
    top = getattr(cfg, "thinker_config", None) or cfg

    def token(name: str) -> int | None:
        for key in (f"{name}_token_id", f"{name}_token_index"):
            value = getattr(top, key, None)
            if isinstance(value, int):
                return value
        return None

    names = getattr(top, "architectures", None) or getattr(cfg, "architectures", None) or [None]
    return ModelConfigs(architecture=names[0], text=getattr(top, "text_config", None) or top, vision=getattr(top, "vision_config", None),
                        audio=getattr(top, "audio_config", None), image_token_id=token("image"), video_token_id=token("video"),
                        audio_token_id=token("audio"))


def engine_adapter(model) -> Adapter:
    """The model adapter of the architecture a vLLM model serves (its config's model_type, or its thinker's), else the
    Qwen-VL default: architecture paths live in model/adapters/, never here."""
    from qdebug.model.adapters import QWEN2_VL, adapter_of_type

    config = getattr(model, "config", None)
    for cfg in (config, getattr(config, "thinker_config", None)):
        found = adapter_of_type(str(getattr(cfg, "model_type", "") or ""))
        if found is not None:
            return found
    return QWEN2_VL


def decoder_layers(model) -> list:
    """The decoder layers of a vLLM multimodal model, where its adapter says vLLM keeps them."""
    paths = engine_adapter(model).engine_layer_paths
    layers = _first_attribute(model, paths)
    if layers is None:
        raise AttributeError(f"{type(model).__name__} has no decoder layers where qdebug looks ({', '.join(paths)})")
    return list(layers)


def decoder_norm(model):
    """The decoder's final norm (what follows the last layer), or None."""
    return _first_attribute(model, engine_norm_paths(model))


def engine_norm_paths(model) -> tuple[str, ...]:
    """Where the adapter of `model`'s architecture says vLLM keeps the final norm."""
    return engine_adapter(model).engine_norm_paths


def _first_attribute(root, paths: tuple[str, ...]):
    """The object at the first dotted path that exists under `root`, or None."""
    for path in paths:
        node = root
        for part in path.split("."):
            node = getattr(node, part, None)
            if node is None:
                break
        if node is not None:
            return node
    return None


def linear_parts(gdn) -> list[tuple[int, int]]:
    """The column blocks of a linear-attention layer's input projection, [q, k, v, z], as (width, heads); z has no
    heads to scramble (0). Qwen3.5's order; Qwen3-Next interleaves its heads and is not handled."""
    tp = int(getattr(gdn, "tp_size", 1) or 1)
    hk, hv = int(gdn.num_k_heads) // tp, int(gdn.num_v_heads) // tp
    dk, dv = int(gdn.head_k_dim), int(gdn.head_v_dim)
    return [(hk * dk, hk), (hk * dk, hk), (hv * dv, hv), (hv * dv, 0)]
