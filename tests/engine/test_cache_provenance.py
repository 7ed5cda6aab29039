"""Cache provenance inside a real vLLM (block size 32, prefix caching on as by default): every cache read the plugin
records names who computed what was served, and whether it was computed from the request's own content (qdebug's
fingerprints). Clean: the same image sent twice and a long shared system prompt are read from the caches, and every
read is the same content. Under each fault of the cache class the reads that served another image are found, with
the request that computed them; which requests are affected is decided here from what was sent (the images' pixels),
never from the fault's name."""

from __future__ import annotations

import base64
import io
import time

import httpx
import pytest
from PIL import Image, ImageDraw

from qdebug.engine.batch_log import read_batch_log
from qdebug.engine.cache_reads import fingerprint
from qdebug.vocab import CacheKind, CacheReuse

from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
SYSTEM = "You are a careful assistant who describes pictures of simple shapes. " * 6  # a few blocks of shared prefix


def scene(i: int) -> Image.Image:
    """A 224x224 scene: a shape whose colour and corner depend on i (distinct pixels for every i)."""
    image = Image.new("RGB", (224, 224), (255, 255, 255))
    colour = [(220, 30, 30), (30, 60, 220), (30, 170, 60), (230, 200, 20)][i % 4]
    x, y = [(20, 20), (120, 20), (20, 120), (120, 120)][(i // 4) % 4]
    ImageDraw.Draw(image).ellipse((x, y, x + 80, y + 80), fill=colour)
    return image


def body(image: Image.Image, name: str, system: bool = False) -> dict:
    """A chat request for one image (as a PNG data URL), named for the plugin's records (no trace asked for)."""
    raw = io.BytesIO()
    image.save(raw, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(raw.getvalue()).decode()
    messages = [{"role": "system", "content": SYSTEM}] if system else []
    messages.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Describe the image."}]})
    return {"model": "demo", "messages": messages, "max_tokens": 8, "temperature": 0, "vllm_xargs": {"qdebug_id": name}}


def serve(vllm_py, where, fault: str | None, requests: list[tuple[str, Image.Image, bool]]) -> dict:
    """Send the requests one at a time to a vLLM with the plugin on (and `fault` planted); their cache reads, by name."""
    env = {"VLLM_PLUGINS": "qdebug", **({"QDEBUG_VLLM_INJECT": fault} if fault else {})}
    with VllmServer(vllm_py, where, trace_dir=where / "traces", extra_env=env, extra_args=("--block-size", "32")) as server:
        for name, image, system in requests:
            response = httpx.post(f"{server.url}/v1/chat/completions", json=body(image, name, system), timeout=300)
            assert response.status_code == 200, response.text
        # the worker learns a request finished in the next step: one more request closes the last
        httpx.post(f"{server.url}/v1/chat/completions", json={"model": "demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
                   timeout=300)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not set(n for n, _, _ in requests[1:]) <= set(read_batch_log(where / "traces").cache_reads):
            time.sleep(0.5)
    return read_batch_log(where / "traces").cache_reads


def test_a_clean_engine_reads_caches_only_for_the_same_content(vllm_py, tmp_path):
    requests = [("a", scene(0), False), ("a-again", scene(0), False), ("b", scene(1), False),
                ("sys-1", scene(2), True), ("sys-2", scene(3), True)]
    reads = serve(vllm_py, tmp_path, None, requests)
    assert all(r.reuse == CacheReuse.SAME for rs in reads.values() for r in rs), reads
    again = {r.cache: r for r in reads["a-again"]}
    assert again[CacheKind.PREFIX].origin_name == "a" and again[CacheKind.PREFIX].start == 0 and again[CacheKind.PREFIX].end >= 32
    assert again[CacheKind.PROCESSOR].origin_name == "a" and again[CacheKind.PROCESSOR].item == 0
    assert not reads.get("b")  # another image at the same positions: nothing of a's is served
    (shared,) = [r for r in reads["sys-2"] if r.cache == CacheKind.PREFIX]  # the system prompt's blocks, up to the image
    assert shared.origin_name == "sys-1" and shared.end >= 64 and shared.media == []


@pytest.mark.parametrize("fault", ["short-media-hash", "encoder-cache-by-size"])
def test_a_cache_keyed_by_something_else_is_found_serving_another_images_content(vllm_py, tmp_path, fault):
    images = [scene(i) for i in range(4)]
    reads = serve(vllm_py, tmp_path, fault, [(f"r{i}", image, False) for i, image in enumerate(images)])
    prints = {f"r{i}": fingerprint(image) for i, image in enumerate(images)}
    wrong = {name: [r for r in rs if r.reuse == CacheReuse.OTHER] for name, rs in reads.items()}
    for name in ("r1", "r2", "r3"):  # each sent an image no earlier request sent: any read of it from a cache is wrong
        assert wrong.get(name), f"{name}: {reads.get(name)}"
        for read in wrong[name]:
            assert read.origin_name == "r0" and read.media[0].fingerprint == prints[name]
            assert read.origin_media[0].fingerprint == prints["r0"]
    caches = {r.cache for rs in wrong.values() for r in rs}
    if fault == "short-media-hash":  # every key takes the media hash: the processor's, the blocks' and (for the image's
        assert {CacheKind.PREFIX, CacheKind.PROCESSOR} <= caches, caches  # positions past the hit blocks) the encoder's
    else:  # the block keys were made before the identifier was changed: only the encoder cache serves another image
        assert caches == {CacheKind.ENCODER}, caches
