"""`qdebug estimate`: a model's parameters, weight memory and a trace's size, from config.json alone.

The parameter count comes from instantiating the architecture on the meta device (no weights are read or
allocated). Trace and extra-memory figures follow the recording policy of `qdebug.trace.runner.RecordPolicy`:
attention weights of the captured layers for the kept query rows × image keys (float32), hidden states
in the model's dtype (per-layer statistics plus the last prompt row, or every row with `keep_hidden`),
each step's raw logits (float32). They are estimates of what a trace holds in memory, not of the zipped file.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Any

from qdebug.errors import DeviceError

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
PROMPT_TOKENS = 32  # chat template + a short question, besides the image tokens


@dataclass
class Estimate:
    """What a model and one traced request will take."""

    architecture: str
    model_type: str
    parameters: int
    dtype: str
    device: str
    weights_bytes: int
    image_tokens: int
    max_new_tokens: int
    layers: int
    layers_captured: int
    trace_bytes: int  # what the trace holds (CPU memory, and about the .qdt size)
    extra_bytes: int  # memory beyond a plain generate on `device` that tracing adds (the trace itself on CPU)
    runtime_bytes: int  # a plain generate's own working memory besides the weights (KV cache, activations), rough

    @property
    def total_bytes(self) -> int:
        """Weights + a plain generate's working memory + what tracing adds."""
        return self.weights_bytes + self.runtime_bytes + self.extra_bytes

    def to_json(self) -> dict:
        """The `--json` document."""
        return {**asdict(self), "total_bytes": self.total_bytes}

    def line(self) -> str:
        """One line for messages: parameters, weights, trace, extra."""
        return (f"{self.architecture}: {self.parameters / 1e9:.2f}B parameters, weights {gib(self.weights_bytes)} in {self.dtype}, "
                f"trace {gib(self.trace_bytes)}, tracing adds {gib(self.extra_bytes)}, total about {gib(self.total_bytes)} on {self.device}")


def gib(n: int) -> str:
    """Bytes as GiB or MiB text."""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def count_parameters(path, adapter) -> tuple[int, Any]:
    """Parameters of the architecture built from `path`/config.json on the meta device (tied weights once), and the
    text model's config as transformers reads it (its defaults filled in for what config.json leaves out)."""
    import torch
    from transformers import AutoConfig

    from qdebug.errors import ModelLoadError, cause

    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        cls = adapter.model_class()
        build = getattr(cls, "from_config", None) or cls._from_config  # Auto classes vs a concrete model class
        with torch.device("meta"):
            model = build(config)
    except Exception as exc:  # transformers' config validation and model constructors raise many kinds
        raise ModelLoadError(f"{path}/config.json: transformers cannot build this model ({cause(exc)})") from None
    return sum(p.numel() for p in model.parameters()), config.get_text_config()


def _device_and_dtype(device: str, dtype: str) -> tuple[str, str]:
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cpu" and not device.startswith("cuda"):
        raise DeviceError(f"--device {device}: expected auto, cpu, cuda or cuda:N")
    if dtype not in ("auto", *BYTES):
        raise DeviceError(f"--dtype {dtype}: expected one of auto, {', '.join(BYTES)}")
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    return device, dtype


def estimate(spec: str, *, image_tokens: int = 1024, dtype: str = "auto", device: str = "auto", max_new_tokens: int = 16,
             layers: str = "all", queries: str = "gen", keep_hidden: bool = False, topk: int = 5) -> Estimate:
    """Estimate for `--model spec` (a checkpoint directory, `demo` or a cached hub id); reads config.json only."""
    from qdebug.trace.policy import parse_layers, resolve_layers

    from qdebug.model.adapters import adapter_for
    from qdebug.model.load import read_config, resolve_model_dir

    path = resolve_model_dir(spec)
    raw = read_config(path)
    adapter = adapter_for(raw, where=f"--model {spec}")
    device, dtype = _device_and_dtype(device, dtype)
    params, text = count_parameters(path, adapter)
    hidden, heads = int(text.hidden_size), int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    n_layers, vocab = int(text.num_hidden_layers), int(getattr(text, "vocab_size", None) or raw["vocab_size"])
    inter = int(getattr(text, "intermediate_size", None) or 4 * hidden)
    captured = resolve_layers(layers, parse_layers(layers), n_layers)
    n_captured = n_layers if captured is None else len(captured)
    e = BYTES[dtype]
    t = image_tokens + PROMPT_TOKENS
    q_prompt = t if queries == "all" else 1
    new = max_new_tokens
    trace = (
        image_tokens * hidden * e  # encode rows
        + t * hidden * e + 2 * 3 * t * 8  # sync: merged embeddings, position ids received and expected
        + n_layers * (t if keep_hidden else 1) * hidden * e  # prefill hidden states
        + n_layers * new * hidden * e  # each step's new-token hidden state
        + n_captured * heads * (q_prompt + new - 1) * image_tokens * 4  # attention rows × image keys
        + new * vocab * 4  # raw logits of every step
        + t * (topk * 12 + 4)  # prompt-position top-k and entropy
    )
    # On the model's device tracing adds generate's processed scores, the side attention rows of one layer, the
    # prompt-logits chunks (256 rows) and the per-layer statistics, all transient; on CPU the trace lives there too.
    transient = max(64 * vocab * (e + 12), t * hidden * 4 * 3, heads * q_prompt * t * 4 * 4)
    extra = new * vocab * 4 + transient + ((trace + t * hidden * e) if device == "cpu" else 0)
    runtime = 2 * n_layers * (t + new) * kv_heads * head_dim * e + 3 * t * inter * e + t * vocab * 0 + 4 * 2**20
    return Estimate(adapter.name, str(raw.get("model_type")), params, dtype, device, params * e, image_tokens, new,
                    n_layers, n_captured, int(trace), int(extra), int(runtime))


def image_tokens_of(spec: str, sizes: list[tuple[int, int]]) -> int:
    """About how many LLM tokens these (width, height) images take, from the checkpoint's processor limits."""
    from qdebug.model.load import read_config, resolve_model_dir

    path = resolve_model_dir(spec)
    vision = read_config(path).get("vision_config") or {}
    patch, merge = int(vision.get("patch_size", 14)), int(vision.get("spatial_merge_size", 2))
    max_pixels = 12845056
    for name in ("preprocessor_config.json", "processor_config.json"):
        try:
            import json

            data = json.loads((path / name).read_text())
        except (OSError, ValueError):
            continue
        data = data.get("image_processor", data)
        size = data.get("size") or {}
        max_pixels = int(size.get("longest_edge") or data.get("max_pixels") or max_pixels)
        break
    unit = patch * merge
    return sum(max(1, math.ceil(min(w * h, max_pixels) / unit**2)) for w, h in sizes)


def available_bytes(device: str) -> int | None:
    """Free memory on `device` now (CUDA: the driver's free bytes; CPU: MemAvailable), or None if unknown."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return None
        index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
        return int(torch.cuda.mem_get_info(index)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def refuse_if_too_big(spec: str, device: str, dtype: str, *, images=(), image_tokens: int | None = None, max_new_tokens: int = 16,
                      layers: str = "all", queries: str = "gen", keep_hidden: bool = False, device_map: str | None = None) -> Estimate | None:
    """Raise DeviceError (with the estimate) before loading when the request cannot fit the device's free memory."""
    from qdebug.model.load import resolve_device

    if device_map is not None:  # accelerate spreads the weights (and may offload); it makes its own plan
        return None
    device = resolve_device(device)
    tokens = image_tokens if image_tokens is not None else image_tokens_of(spec, [im.size for im in images])
    est = estimate(spec, image_tokens=tokens, dtype=dtype, device=device, max_new_tokens=max_new_tokens, layers=layers,
                   queries=queries, keep_hidden=keep_hidden)
    free = available_bytes(device)
    if free is not None and est.total_bytes > free:
        raise DeviceError(f"this request needs about {gib(est.total_bytes)} on {device} but {gib(free)} is free "
                          f"({est.line()}); expected a smaller model, --dtype bfloat16, fewer image tokens or another device")
    return est
