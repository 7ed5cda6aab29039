"""TraceMeta: how a trace was made (qdebug and library versions, the model, what was captured)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass
class TraceMeta:
    """The `meta` part of a trace. Fields left None are absent from its JSON; keys this qdebug does not know are
    kept in `extra` and written back after the known ones."""

    model: dict  # LoadedModel.describe(): spec, path, architecture, device, dtype, attn_kernel
    num_layers: int
    num_heads: int
    qdebug: str | None = None
    created: str | None = None
    torch: str | None = None
    transformers: str | None = None
    attn_capture: str | None = None  # which layers recorded weights, and which kernel computed each layer
    layers_captured: list[int] | None = None
    queries: str | list[int] | None = None  # as given: "gen", "all" or prompt positions
    keep_hidden: bool | None = None
    processors: list[str] | None = None  # the checkpoint's logits processors that changed the scores
    num_kv_heads: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    audio: list[dict] | None = None  # one entry per clip (audio families)
    layer_types: list[str] | None = None  # linear_attention / full_attention per layer (Qwen3.5)
    deepstack: dict | None = None  # levels and per-layer additions (Qwen3-VL)
    input_path: str | None = None  # how the decoder got its input (trace.runner.INPUT_PATHS)
    partial: bool | None = None  # a snapshot of a run paused mid-way (TUI)
    note: str | None = None
    onnx: dict | None = None  # what an onnxruntime run of an export exposed
    engine: dict | None = None  # the serving engine that ran the request (a vLLM trace: name, version, backend, ranks)
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """As the trace JSON's `meta` object (keys in the order qdebug has always written them)."""
        out = {f.name: getattr(self, f.name) for f in _ORDER if getattr(self, f.name) is not None}
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: dict) -> "TraceMeta":
        """From a trace JSON's `meta` object (TypeError when a required key is missing)."""
        known = {f.name for f in _ORDER}
        return cls(**{k: v for k, v in data.items() if k in known}, extra={k: v for k, v in data.items() if k not in known})


# JSON key order: the order assemble_trace, the family recorders, the runner and the TUI add them.
_JSON_KEYS = ("qdebug", "created", "model", "torch", "transformers", "attn_capture", "layers_captured", "queries", "keep_hidden",
              "processors", "num_layers", "num_heads", "num_kv_heads", "hidden_size", "vocab_size", "audio", "layer_types",
              "deepstack", "input_path", "partial", "note", "onnx", "engine")
_ORDER = sorted((f for f in fields(TraceMeta) if f.name != "extra"), key=lambda f: _JSON_KEYS.index(f.name))


@dataclass
class TraceRequest:
    """The `request` part of a trace: what was asked (id, prompt, inputs, budget). Fields left None are absent
    from its JSON; unknown keys are kept in `extra`."""

    prompt: str
    id: str | None = None
    images: list[str] | None = None
    max_new_tokens: int | None = None
    image_sha256: list[str] | None = None  # of each image's pixels: diff's same-request check
    audio: list[str] | None = None  # clip paths (audio families)
    videos: list[str] | None = None  # video paths (a file or a frame folder each)
    video_sha256: list[str] | None = None  # of each video's sampled frames' pixels, in order
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """As the trace JSON's `request` object (keys in the order qdebug has always written them)."""
        out = {name: getattr(self, name) for name in _REQUEST_KEYS if getattr(self, name) is not None}
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: dict) -> "TraceRequest":
        """From a trace JSON's `request` object (TypeError when `prompt` is missing)."""
        return cls(**{k: v for k, v in data.items() if k in _REQUEST_KEYS}, extra={k: v for k, v in data.items() if k not in _REQUEST_KEYS})


_REQUEST_KEYS = ("id", "prompt", "images", "max_new_tokens", "image_sha256", "audio", "videos", "video_sha256")
