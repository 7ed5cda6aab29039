"""Each family's tiny checkpoint at the sizes vLLM's CPU build serves, a traced vLLM serving it, and one request of
its modality, traced by the engine and by qdebug's own transformers run of the same checkpoint and dtype."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.families.build import BUILDERS, tone

from .client import SAMPLE, engine_trace, send
from .vllm_server import VllmServer

# What each family needs from the engine: Qwen3.5's gated-delta-rule CPU kernel runs in bfloat16 only.
DTYPES = {"qwen2_5_vl": "float32", "qwen3_vl": "float32", "qwen3_5": "bfloat16", "qwen2_audio": "float32", "qwen2_5_omni": "float32"}
PROMPT = "Describe the image."


@dataclass
class Pair:
    """One request's engine trace and local trace, the answer the client got, and the server that ran it."""

    family: str
    answer: str
    engine: object
    local: object
    server: VllmServer


def build(family: str, where: Path) -> Path:
    """The family's tiny random checkpoint at engine sizes (hidden 128, head 32; Qwen3.5 linear heads 64); Qwen2.5-Omni's
    full checkpoint around its thinker (vLLM serves `qwen2_5_omni`, not a bare thinker; transformers loads either)."""
    if family == "qwen2_5_omni":
        from tests.families.build import build_qwen2_5_omni_full

        return build_qwen2_5_omni_full(where, BUILDERS[family](where.with_name(where.name + "-thinker"), engine=True))
    return BUILDERS[family](where, engine=True)


def request_of(family: str, where: Path, max_new_tokens: int = 8):
    """A request of the family's modality: a 1 s clip at 16 kHz for Qwen2-Audio, a sample scene for the others."""
    from qdebug.trace.audio import load_audio
    from qdebug.trace.request import build_media_request
    from qdebug.trace.request import build_request, load_image

    if family == "qwen2_audio":
        return build_media_request("What is it?", clips=[load_audio(tone(where / "tone.wav", rate=16000))], max_new_tokens=max_new_tokens)
    path = str(SAMPLE / "red_circle_top_left.png")
    return build_request(PROMPT, [path], images=[load_image(path)], max_new_tokens=max_new_tokens)


def local_trace(checkpoint: Path, dtype: str, request):
    """qdebug's transformers trace of `request` on `checkpoint` in `dtype`, every prompt row kept."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model
    from qdebug.trace.runner import RecordPolicy, trace_request

    quiet_transformers()
    return trace_request(load_model(str(checkpoint), "cpu", dtype, "sdpa"), request, RecordPolicy(keep_hidden=True))


def traced_pair(family: str, server: VllmServer, checkpoint: Path, where: Path, tag: str) -> Pair:
    """Send the family's request tagged `tag`, read the engine's trace, and trace the same request locally."""
    request = request_of(family, where)
    answer = send(server, request, tag)
    return Pair(family, answer, engine_trace(server, tag), local_trace(checkpoint, DTYPES[family], request), server)
