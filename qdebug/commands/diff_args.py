"""What `qdebug diff` was asked for: its own module so that `diff` and `diff_inputs` both read it and neither imports the other."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field

from qdebug.model.choice import ModelChoice


@dataclass
class DiffArgs(ModelChoice):
    """Everything `qdebug diff` was asked for (the model: `ModelChoice`'s fields)."""

    first: str
    second: str
    _: KW_ONLY
    vary: str = "none"
    order: str = "image-first"
    inject: str | None = None
    a_dtype: str | None = None
    b_dtype: str | None = None
    max_new_tokens: int = 16
    atol: float | None = None
    rtol: float | None = None
    images: list[str] = field(default_factory=list)  # more images of the same request, after `first`
    onnx: str | None = None  # an export directory (or mapping file): B is that export in onnxruntime
    engine: str | None = None  # a vLLM server running qdebug's plugin: B is that engine's trace of the request
    engine_traces: str | None = None  # the folder that server writes its traces to
    served_model: str | None = None
    api_key_env: str | None = None
    timeout: float = 120.0
    fps: float | None = None  # a video's sampling rate (see `qdebug attn --fps`)
    max_frames: int | None = None
