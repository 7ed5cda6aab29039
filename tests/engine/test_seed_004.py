"""Seed 004 inside vLLM: Qwen2-Audio asked once with token ids (the chat path, the engine merges the clip's rows) and
once with the decoder's input rows themselves (`prompt_embeds`, as a service that embeds for itself does); the two
engine traces are compared by `qdebug diff`, as the local check compares transformers' two paths."""

from __future__ import annotations

import base64
import io
import json

import httpx
import pytest

from tests.endpoint.conftest import run_qdebug

from .client import engine_trace, send
from .families import build, local_trace, request_of
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def two_paths(vllm_py, tmp_path_factory):
    import torch

    from qdebug.trace.tensor_names import TensorKind as T

    where = tmp_path_factory.mktemp("seed-004")
    checkpoint = build("qwen2_audio", where / "checkpoint")
    request = request_of("qwen2_audio", where)
    rows = local_trace(checkpoint, "float32", request)  # the client's own embedding: token rows with the clip's rows merged
    buf = io.BytesIO()
    torch.save(rows.tensor(T.SYNC_EMBEDS).float().contiguous(), buf)
    with VllmServer(vllm_py, where, model=checkpoint, trace_dir=where / "traces", extra_args=("--enable-prompt-embeds",)) as server:
        server.traces = where / "traces"
        send(server, request, "ids-path")
        body = {"model": "demo", "prompt_embeds": base64.b64encode(buf.getvalue()).decode(), "max_tokens": request.max_new_tokens,
                "temperature": 0, "vllm_xargs": {"qdebug_trace": True, "qdebug_id": "embeds-path", "qdebug_prompt_ids": rows.input_ids}}
        response = httpx.post(f"{server.url}/v1/completions", json=body, timeout=120)
        assert response.status_code == 200, response.text
        yield engine_trace(server, "ids-path"), engine_trace(server, "embeds-path"), server.traces, response.json()


def test_the_engine_traces_a_prompt_embeds_request_with_the_ids_its_client_names(two_paths):
    ids_path, embeds_path, _, answer = two_paths
    assert ids_path.meta.input_path is None and embeds_path.meta.input_path == "embeds"
    assert embeds_path.input_ids == ids_path.input_ids  # the ids the client said its rows stand for
    assert embeds_path.meta.audio is None and ids_path.meta.audio[0]["rows"] == 25  # the engine merged no clip: the rows came whole
    assert answer["choices"][0]["text"].strip() == embeds_path.generated_text.strip()


def test_diff_of_the_two_engine_traces_agrees_at_every_stage(two_paths, tmp_path):
    _, _, traces, _ = two_paths
    out = tmp_path / "d.json"
    result = run_qdebug("diff", str(traces / "ids-path.qdt"), str(traces / "embeds-path.qdt"), "--json", str(out))
    assert result.returncode == 0 and out.exists(), result.stdout + result.stderr
    doc = json.loads(out.read_text())
    assert doc["first_divergence"] is None and doc["texts_agree"]
    assert {s["name"]: s["verdict"] for s in doc["stages"] if s["name"].startswith(("sync", "layer", "logits"))} == \
        {**{"sync": "ok", "logits": "ok"}, **{f"layer.{n}": "ok" for n in range(2)}}
