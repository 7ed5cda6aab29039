"""Faults the plugin can plant inside vLLM (`QDEBUG_VLLM_INJECT`), for reproducing the seeds' bugs in the engine.

- `head-first:L`: decoder layer L's kernel receives its q/k/v rows laid out head-first ([H, T, D]) where it reads
  token-major ([T, H, D]), as seed 001's kernel did: the softmax attention kernel's inputs, or, on a linear-attention
  layer (Qwen3.5), the gated-delta-rule core's q/k/v rows as the input projection hands them over.
- `shared-visual-buffer` (seeded by `QDEBUG_VLLM_SEED`): the images of one scheduler step pass through one unlocked
  buffer between the encoder and the merge, in an order drawn from the seed (seed 000's service).
- `batch-dependent-encoder`: an item's encoder rows depend on the other items of its encoder call (unchanged alone);
  `batch-dependent-decoder:L`: decoder layer L's rows of a request depend on the step's other requests (batch_faults.py).
- `nondeterministic-encoder` (seeded by `QDEBUG_VLLM_SEED`): each encoder call's rows get noise drawn anew per call
  (batch_faults.py): the same item, alone, repeated, disagrees with itself.
- `short-media-hash[:CHARS]`, `encoder-cache-by-size`: a cache keyed by something other than the content, so one
  request is served another's media (cache_faults.py; planted in the front end or engine core, not the worker).
- `temporal-ids-flat`: every video token's temporal MRoPE id is its video's first (a video placed as one image), in the
  positions the runner keeps for the request (engine_video_faults.py); the model's own position function is untouched.
- `placeholder-shift:N`: each item's placeholder range starts N tokens past the prompt's placeholder tokens, in the
  ranges the runner keeps for the request (placeholder_faults.py): the rows land N positions late (the seeds' desync).

A fault only changes tensors; what it says about itself (one log line) is a label. qdebug's findings come from
what its tracer observes.
"""

from __future__ import annotations

import logging
import os

from .cache_faults import PRESETS as CACHE_PRESETS
from .cache_faults import is_cache_fault
from .layouts import head_first
from .vllm_model import decoder_layers, linear_parts

ENV_INJECT = "QDEBUG_VLLM_INJECT"
ENV_SEED = "QDEBUG_VLLM_SEED"
PRESETS = ("head-first:LAYER", "shared-visual-buffer", "batch-dependent-encoder", "batch-dependent-decoder:LAYER", "temporal-ids-flat",
           "nondeterministic-encoder", "placeholder-shift:N", *CACHE_PRESETS)

log = logging.getLogger("vllm.qdebug")


def requested() -> str | None:
    """The fault the server's environment asks for, if any."""
    return os.environ.get(ENV_INJECT, "").strip() or None


def install(runner, name: str) -> None:
    """Plant fault `name` in a loaded runner's model; an unknown name or layer is logged and nothing is planted."""
    model = runner.model
    if is_cache_fault(name):
        return  # planted where vLLM keys its caches, in the process that does (vllm_plugin.register)
    if name.startswith("head-first:"):
        layer = name.split(":", 1)[1]
        layers = decoder_layers(model)
        if not layer.isdigit() or int(layer) >= len(layers):
            log.error("qdebug: %s=%s: expected head-first:LAYER with LAYER in 0..%d; nothing injected", ENV_INJECT, name, len(layers) - 1)
            return
        kind = _head_first(layers[int(layer)])
        log.warning("qdebug: injected fault head-first at layer %s (%s)", layer, kind)
    elif name == "shared-visual-buffer":
        from .shared_buffer import SharedStepBuffer

        from qdebug.env import env_int
        from qdebug.errors import InputError

        try:
            seed = env_int(ENV_SEED, 0, minimum=0)
        except InputError as exc:  # inside the engine a bad value is said, never raised: the server keeps serving
            log.error("qdebug: %s; nothing injected", exc)
            return
        SharedStepBuffer(seed).install(model)
        log.warning("qdebug: injected fault shared-visual-buffer (seed %d)", seed)
    elif name == "batch-dependent-encoder":
        from .batch_faults import plant_encoder

        plant_encoder(model)
        log.warning("qdebug: injected fault batch-dependent-encoder")
    elif name.startswith("batch-dependent-decoder:"):
        from .batch_faults import plant_decoder

        layer = name.split(":", 1)[1]
        layers = decoder_layers(model)
        if not layer.isdigit() or int(layer) >= len(layers):
            log.error("qdebug: %s=%s: expected batch-dependent-decoder:LAYER with LAYER in 0..%d; nothing injected",
                      ENV_INJECT, name, len(layers) - 1)
            return
        plant_decoder(runner, layers[int(layer)])
        log.warning("qdebug: injected fault batch-dependent-decoder at layer %s", layer)
    elif name == "nondeterministic-encoder":
        from .batch_faults import plant_noise

        seed = int(raw) if (raw := os.environ.get(ENV_SEED, "0").strip()).isdigit() else 0
        plant_noise(model, seed)
        log.warning("qdebug: injected fault nondeterministic-encoder (seed %d)", seed)
    elif name == "temporal-ids-flat":
        from .engine_video_faults import plant_temporal_ids_flat

        plant_temporal_ids_flat(runner)
        log.warning("qdebug: injected fault temporal-ids-flat")
    elif name.startswith("placeholder-shift:"):
        from .placeholder_faults import plant_placeholder_shift

        by = name.split(":", 1)[1]
        if not by.isdigit() or not 1 <= int(by) <= 64:
            log.error("qdebug: %s=%s: expected placeholder-shift:N with N in 1..64; nothing injected", ENV_INJECT, name[:80])
            return
        plant_placeholder_shift(runner, int(by))
        log.warning("qdebug: injected fault placeholder-shift by %s token(s)", by)
    else:
        log.error("qdebug: %s=%s: expected one of %s; nothing injected", ENV_INJECT, name, ", ".join(PRESETS))


def _head_first(layer) -> str:
    """Plant the head-first layout in one decoder layer; which kernel it reached."""
    attn = getattr(getattr(layer, "self_attn", None), "attn", None)
    if attn is not None:  # softmax attention: (query, key, value) enter vLLM's Attention as [tokens, heads × dim]
        heads = (int(attn.num_heads), int(attn.num_kv_heads), int(attn.num_kv_heads))

        def scramble(module, args, kwargs):
            qkv = [kwargs.pop(n) if n in kwargs else None for n in ("query", "key", "value")]
            qkv = [q if q is not None else args[i] for i, q in enumerate(qkv)]
            return (*[head_first(t, h) for t, h in zip(qkv, heads)], *args[3:]), kwargs

        attn.register_forward_pre_hook(scramble, with_kwargs=True)
        return "softmax attention kernel"
    gdn = getattr(layer, "linear_attn", None)
    if gdn is not None and getattr(gdn, "gqa_interleaved_layout", False):
        raise AttributeError("Qwen3-Next's interleaved q/k/v/z projection is not handled (Qwen3.5's is)")
    if gdn is not None:  # gated delta rule: [q | k | v | z] rows leave the input projection for the core
        parts = linear_parts(gdn)

        def scramble_linear(module, args, output):
            rows, bias = output if isinstance(output, tuple) else (output, None)
            pieces = list(rows.split([n for n, _ in parts], dim=-1))
            pieces = [head_first(p, h) if h else p for p, (_, h) in zip(pieces, parts)]
            import torch

            rows = torch.cat(pieces, dim=-1)
            return (rows, bias) if isinstance(output, tuple) else rows

        gdn.in_proj_qkvz.register_forward_hook(scramble_linear)
        return "gated-delta-rule core"
    raise AttributeError(f"{type(layer).__name__} has neither self_attn.attn nor linear_attn")
