"""Send a request to the test's vLLM the way a client tags it for qdebug, and read back its engine trace."""

from __future__ import annotations

from pathlib import Path

import httpx

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
PROMPT = "Describe the image."


def request_for(image: str, prompt: str = PROMPT, max_new_tokens: int = 16):
    """qdebug's Request for one sample image (the same object the local reference runs)."""
    from qdebug.trace.request import build_request, load_image

    path = str(SAMPLE / image)
    return build_request(prompt, [path], images=[load_image(path)], max_new_tokens=max_new_tokens)


def send(server, request, qdebug_id: str | None = None, tagged: bool = True) -> str:
    """POST one chat completion (greedy); the answer's text."""
    from qdebug.replay.endpoint import chat_body

    body = chat_body(request, "demo", top_logprobs=0)
    if tagged:
        body["vllm_xargs"] = {"qdebug_trace": True, **({"qdebug_id": qdebug_id} if qdebug_id else {})}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def engine_trace(server, qdebug_id: str, timeout: float = 60.0):
    """The engine's trace of the request tagged `qdebug_id` (waits for the plugin to write it)."""
    from qdebug.commands.engine_diff import await_trace

    return await_trace(server.traces, qdebug_id, timeout)


def local_trace(request):
    """qdebug's own transformers trace of `request` on the demo, float32, every prompt row kept."""
    from qdebug.trace.runner import RecordPolicy, trace_request

    return trace_request(demo_model(), request, RecordPolicy(keep_hidden=True))


_MODEL = {}


def demo_model():
    """The demo checkpoint, loaded once per test session (CPU, float32, SDPA)."""
    if "demo" not in _MODEL:
        from qdebug.model.load import load_model

        _MODEL["demo"] = load_model("demo", "cpu", "float32", "sdpa")
    return _MODEL["demo"]
