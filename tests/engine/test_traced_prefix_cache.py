"""Traced requests read vLLM's caches like any other (block size 32, prefix caching on as by default): the trace of a
request whose first 64 prompt positions the prefix cache served holds the rows of the positions it computed, says which
positions were served and who had computed them, and is compared with the local model at the computed positions only.
Clients that need whole traces ask for them (`diff --engine` sends a fresh cache salt and media uuids)."""

from __future__ import annotations

import json

import httpx
import pytest

from typer.testing import CliRunner

from qdebug.analysis.diff import diff_traces
from qdebug.cli import app
from qdebug.engine.cache_reads import CacheRead
from qdebug.replay.endpoint import chat_body
from qdebug.trace.cached import cached_prefix, computed_from
from qdebug.trace.request import build_request
from qdebug.trace.tensor_names import TensorKind as T
from qdebug.vocab import CacheKind, CacheReuse

from .client import engine_trace, local_trace
from .test_cache_provenance import scene
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
PROMPT = "Describe the image."
HIT = 64  # two blocks of 32: the prompt is 75 positions, its image's 64 placeholders at 3..66


def _server(vllm_py, where, fault: str | None = None) -> VllmServer:
    env = {"VLLM_PLUGINS": "qdebug", **({"QDEBUG_VLLM_INJECT": fault} if fault else {})}
    return VllmServer(vllm_py, where, trace_dir=where / "traces", extra_env=env, extra_args=("--block-size", "32"))


def _request(i: int):
    return build_request(PROMPT, [], images=[scene(i)], max_new_tokens=8)


def _send(server, request, name: str) -> None:
    """POST a request tagged for tracing, as any client would: no salt, no uuid (production caching)."""
    body = {**chat_body(request, "demo", top_logprobs=0), "vllm_xargs": {"qdebug_trace": True, "qdebug_id": name}}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text


def _prefix_reads(trace) -> list[CacheRead]:
    return [r for r in map(CacheRead.from_json, trace.meta.engine.get("cache_reads", [])) if r.cache == CacheKind.PREFIX]


def _flagged_positions(result) -> list[int]:
    """Every prompt position the comparison names (first parting rows, the rows that moved most)."""
    return [p for s in result.stages if not s.name.startswith("step.")
            for p in [s.token_index, *(t["index"] for t in s.top_tokens)] if p is not None]


@pytest.fixture(scope="module")
def clean(vllm_py, tmp_path_factory):
    """A clean vLLM at block size 32 with the plugin on, for this module's tests (each sends images the others do not)."""
    where = tmp_path_factory.mktemp("prefix")
    with _server(vllm_py, where) as server:
        server.traces = where / "traces"
        yield server


def test_the_same_image_twice_traced_reads_the_prefix_cache_and_agrees_with_the_local_model(clean, tmp_path):
    request = _request(0)
    _send(clean, request, "first")
    _send(clean, request, "second")
    first, second = engine_trace(clean, "first"), engine_trace(clean, "second")
    local = local_trace(request)
    prompt = len(local.input_ids)
    assert first.input_ids == second.input_ids == local.input_ids and prompt == 75
    assert computed_from(first) == 0 and first.tensor(T.LAYER_HIDDEN, layer=0).shape[0] == prompt
    cached = cached_prefix(second)
    assert cached is not None and cached.end == HIT and cached.origins == ("first",) and cached.reuse == CacheReuse.SAME
    assert "prompt positions 0..63 were not computed in this run" in cached.said and "computed by first" in cached.said
    (read,) = _prefix_reads(second)
    assert (read.start, read.end, read.origin_name, read.reader_name, read.reuse) == (0, HIT, "first", "second", CacheReuse.SAME)
    for n in range(second.num_layers):  # the rows of the positions it computed, and those only
        assert second.tensor(T.LAYER_HIDDEN, layer=n).shape[0] == prompt - HIT
    assert second.tensor(T.SYNC_EMBEDS).shape[0] == prompt - HIT and second.tensor(T.SYNC_POSITION_IDS).shape[-1] == prompt - HIT
    assert second.stages["sync"].ok and second.stages["encode"].ok, second.findings
    (image0,) = second.stages["sync"].summary.images
    assert image0.visual_offset == image0.text_offset == 3 and "first 61 of 64 placeholders" in image0.cached and "first" in image0.cached
    # the local comparison at the computed positions: no divergence anywhere, the same answer
    result = diff_traces(local, second)
    assert result.first_divergence is None, result.to_json()["stages"]
    assert result.compared_from == HIT and all(p >= HIT for p in _flagged_positions(result))
    assert any(f.kind == "partial_comparison" and "compared at prompt positions 64..74 only" in f.message and "computed by first" in f.message
               for f in result.findings)
    assert second.generated_ids == first.generated_ids == local.generated_ids


def test_diff_engine_sends_fresh_cache_identities_so_its_traces_stay_whole(clean, tmp_path):
    image = tmp_path / "scene4.png"
    scene(4).save(image)
    doc = tmp_path / "d.json"
    for _ in range(2):  # the same image again: without a fresh salt its prefix would be served from the first run's KV
        result = CliRunner().invoke(app, ["diff", str(image), PROMPT, "--engine", clean.url, "--engine-traces", str(clean.traces),
                                          "--json", str(doc), "--max-new-tokens", "8"])
        assert result.exit_code == 0, result.output
        said = json.loads(doc.read_text())
        assert said["compared_from"] == 0 and said["first_divergence"] is None
    names = [line["qdebug_id"] for line in _index(clean.traces) if str(line.get("qdebug_id", "")).startswith("qdebug-diff-")]
    assert len(names) == 2 and not any(cached_prefix(engine_trace(clean, name)) for name in names)


def test_replay_with_engine_caches_kept_judges_prefix_hit_traces_at_their_computed_positions(clean, tmp_path):
    for i in (5, 6):
        scene(i).save(tmp_path / f"scene{i}.png")
    lines = [{"id": rid, "arrival_ts": 1000.0 + k * 0.01, "max_tokens": 8,
              "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": f"scene{i}.png"}},
                                                        {"type": "text", "text": PROMPT}]}]}
             for k, (rid, i) in enumerate((("same-1", 5), ("same-2", 5), ("other", 6)))]
    capture = tmp_path / "capture.jsonl"
    capture.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(app, ["replay", str(capture), "--endpoint", clean.url, "--engine-traces", str(clean.traces),
                                      "--model", "demo", "--device", "cpu", "--engine-caches", "keep", "--concurrency", "3",
                                      "--json", str(out)])
    assert result.exit_code == 0 and result.exception is None, result.output
    doc = json.loads(out.read_text())
    assert {r["id"]: r["verdict"] for r in doc["requests"]} == {"same-1": "ok", "same-2": "ok", "other": "ok"}, doc["findings"]
    assert doc["engine_traces"]["read"] == doc["engine_traces"]["expected"] == 6
    # every run after the first of each image (4 of the 6) was served its prefix: the report says so, and how they compared
    said = "4 read a prefix from the prefix cache (compared at the positions they computed)"
    assert doc["engine_traces"]["cached_prefix"] == 4 and said in doc["engine_traces"]["said"] and said in " ".join(result.output.split())
    # the traced runs read the prefix cache: the second request alone was served the first's KV, and its trace says so
    (line,) = [line for line in _index(clean.traces) if str(line.get("qdebug_id", "")).endswith(".same-2.reference")]
    cached = cached_prefix(engine_trace(clean, line["qdebug_id"]))
    assert cached is not None and cached.end == HIT and cached.origins[0].endswith(".same-1.reference"), cached
    assert cached.reuse == CacheReuse.SAME


def _index(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "index.jsonl").read_text().splitlines()]


def test_a_short_media_hash_serves_another_images_kv_and_the_trace_names_its_origin(vllm_py, tmp_path):
    with _server(vllm_py, tmp_path, "short-media-hash") as server:
        server.traces = tmp_path / "traces"
        _send(server, _request(0), "a")
        _send(server, _request(1), "b")
        b = engine_trace(server, "b")
    cached = cached_prefix(b)
    assert cached is not None and cached.end == HIT and cached.origins == ("a",) and cached.reuse == CacheReuse.OTHER
    assert "computed by a (other content" in cached.said
    (read,) = _prefix_reads(b)
    assert read.origin_name == "a" and read.reuse == CacheReuse.OTHER and (read.start, read.end) == (0, HIT)
    assert b.tensor(T.LAYER_HIDDEN, layer=0).shape[0] == len(b.input_ids) - HIT
    # its computed positions were computed on another image's KV (and rows): they part from the local model, and the
    # comparison says where, never at a position the engine did not compute
    local = local_trace(_request(1))
    result = diff_traces(local, b)
    assert result.first_divergence is not None and result.compared_from == HIT
    # the processor and encoder caches served a's rows too: the image's computed rows are a's encoding, parted at encode
    assert result.first_divergence.name == "encode" and HIT <= result.first_divergence.token_index < 67, result.to_json()["stages"]
    assert _flagged_positions(result) and all(p >= HIT for p in _flagged_positions(result)), result.to_json()["stages"]
