"""Where a vLLM model keeps the parts qdebug hooks: decoder layers, final norm, a linear-attention projection's blocks."""

from __future__ import annotations


def decoder_layers(model) -> list:
    """The decoder layers of a vLLM multimodal model (`language_model.model.layers`, or `model.layers`)."""
    layers = _first_attribute(model, ("language_model.model.layers", "model.layers", "language_model.layers"))
    if layers is None:
        raise AttributeError(f"{type(model).__name__} has no decoder layers where qdebug looks (language_model.model.layers)")
    return list(layers)


def decoder_norm(model):
    """The decoder's final norm (what follows the last layer), or None."""
    return _first_attribute(model, ("language_model.model.norm", "model.norm", "language_model.norm"))


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
