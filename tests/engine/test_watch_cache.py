"""The watch's `cache` check inside a real vLLM (QDEBUG_VLLM_WATCH=1, block size 32, prefix caching on as by default),
under untagged traffic: each fault of the cache class is counted on /metrics under check="cache" and its findings name
the cache, the reused range and the donor; a clean server under 3 × 200 requests that reuse every cache legitimately
(the same images again, a long shared system prompt) counts those reads as the same content and finds nothing. Which
requests are affected is decided from what was sent (the images' pixels), never from the fault's name."""

from __future__ import annotations

import base64
import io
import random
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from qdebug.engine.cache_reads import fingerprint
from qdebug.engine.watch_log import read_findings

from .test_cache_provenance import SYSTEM, body, scene
from .test_watch import CHECKS, ERRORS, VIOLATIONS, agreed, settled
from .vllm_server import VllmServer
from .watch_traffic import distinct_images, send_all

pytestmark = pytest.mark.vllm
READS = "qdebug_watch_cache_reads_total"


def watched(vllm_py, where: Path, **env: str) -> VllmServer:
    """A vLLM at block size 32 with the watch on (default sample), its findings in `where/watch` (`server.watch`);
    nothing traced but what the flight recorder records."""
    where.mkdir(parents=True, exist_ok=True)
    env = {"QDEBUG_VLLM_WATCH": "1", "QDEBUG_VLLM_WATCH_DIR": str(where / "watch"), **env}
    server = VllmServer(vllm_py, where, extra_env=env, extra_args=("--block-size", "32"))
    server.watch = where / "watch"
    return server


@pytest.mark.parametrize("fault", ["short-media-hash", "encoder-cache-by-size"])
def test_a_cache_serving_another_images_content_is_counted_and_its_donor_logged(vllm_py, tmp_path, fault):
    images = [scene(i) for i in range(4)]
    prints = {f"r{i}": fingerprint(image)[:8] for i, image in enumerate(images)}
    with watched(vllm_py, tmp_path, QDEBUG_VLLM_INJECT=fault) as server:
        for i, image in enumerate(images):  # one at a time: r0 is computed (and cached) before r1 arrives
            response = httpx.post(f"{server.url}/v1/chat/completions", json=body(image, f"r{i}"), timeout=300)
            assert response.status_code == 200, response.text
        series = settled(server, lambda s: s.get((VIOLATIONS, "cache"), 0) > 0)
        series, found = agreed(server, series, "cache")
        # the worker learns that the last request finished in its next step: one more closes it (its trace is written)
        httpx.post(f"{server.url}/v1/chat/completions", json={"model": "demo", "messages": [{"role": "user", "content": "hi"}],
                                                                "max_tokens": 1}, timeout=300)
        # the encoder cache's readers start at their first position (no KV block of theirs was cached): traced whole
        recorded = [server.watch / f.trace for f in found if f.trace] if fault == "encoder-cache-by-size" else []
        deadline = time.monotonic() + 60
        while not all(p.exists() for p in recorded) and time.monotonic() < deadline:
            time.sleep(0.25)
    cache = [f for f in found if f.check == "cache"]
    assert cache and all(f.outcome == "violation" for f in cache), [(f.outcome, f.evidence) for f in cache]
    assert series[(VIOLATIONS, "cache")] == len(cache) <= series[(CHECKS, "cache")] and series[(ERRORS, "cache")] == 0, series
    assert sum(v for (name, kind), v in series.items() if name == READS and kind.endswith("/other_content")) == len(cache), series
    # each of r1..r3 sent an image no earlier request sent: every read of it from a cache is another's content, r0's
    assert {f.client_id for f in cache} == {"r1", "r2", "r3"}, [(f.client_id, f.evidence) for f in cache]
    (donor,) = {d for f in cache for d in f.donors}
    for f in cache:
        assert f.donors == [donor] and f" computed by {donor} (r0)" in f.evidence, f.evidence
        assert f"fingerprint {prints[f.client_id]}" in f.evidence and f"fingerprint {prints['r0']}" in f.evidence, f.evidence
    caches = {f.evidence.split(" ", 1)[0]: f.stage for f in cache}
    if fault == "short-media-hash":  # one key for every image: the processor's, the prefix blocks'
        assert {"prefix_cache": "sync", "processor_cache": "preprocess"}.items() <= caches.items(), caches
        prefix = next(f for f in cache if f.evidence.startswith("prefix_cache"))
        assert prefix.evidence.startswith("prefix_cache served positions 0..63 "), prefix.evidence  # two blocks of 32
    else:  # only the encoder cache keys by size: its reads, each traced by the flight recorder when it could record
        assert caches == {"encoder_cache": "encode"}, caches
        assert all(f.evidence.startswith("encoder_cache served image item 0 (positions ") for f in cache)
        traced = [f for f in cache if f.trace]
        assert traced and list(server.watch.glob("flight-*.json")), [f.trace for f in cache]
        assert all((server.watch / f.trace).exists() for f in traced), [f.trace for f in traced]


def _png_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _chat(url: str, system: bool = False, question: str = "") -> dict:
    """An untagged chat request for one image (after the long shared system prompt, or after a question of its own),
    one token answered."""
    messages = [{"role": "system", "content": SYSTEM}] if system else []
    before = [{"type": "text", "text": question}] if question else []
    messages.append({"role": "user", "content": [*before, {"type": "image_url", "image_url": {"url": url}},
                                                 {"type": "text", "text": "Describe the image."}]})
    return {"model": "demo", "messages": messages, "max_tokens": 1, "temperature": 0}


def legitimate_round(images: list[Path], fresh: list[Path], rng: random.Random) -> list[dict]:
    """200 requests that reuse every cache legitimately, in a shuffled order: 40 images sent three times each (twice
    alone: the second may read the first's KV blocks; once after a question of its own, so that no KV block before
    the image is shared and its encoder rows can only come from the encoder cache), 40 new images after the shared
    system prompt, 40 new images alone."""
    bodies = [_chat(_png_url(p)) for p in images for _ in range(2)]
    bodies += [_chat(_png_url(p), question=f"Question {rng.randrange(10**6)}, about this picture:") for p in images]
    bodies += [_chat(_png_url(p), system=True) for p in fresh[:40]] + [_chat(_png_url(p)) for p in fresh[40:80]]
    rng.shuffle(bodies)
    return bodies


def test_a_clean_server_under_three_times_200_requests_reusing_caches_has_no_cache_violation(vllm_py, tmp_path):
    rng = random.Random(48)
    pool = distinct_images(tmp_path / "pool", 60, seed=480)  # each round repeats 40 of them: some sent in an earlier round
    rounds = [legitimate_round(rng.sample(pool, 40), distinct_images(tmp_path / "fresh", 80, seed=481 + k), rng) for k in range(3)]
    with watched(vllm_py, tmp_path) as server:
        start = time.monotonic()
        for bodies in rounds:
            send_all(server, bodies, concurrency=200)  # each answered (HTTP 200)
        sent = time.monotonic() - start
        series = settled(server, lambda s: s.get((CHECKS, "cache"), 0) > 0)
        found = read_findings(str(server.watch))
    reads = {kind: v for (name, kind), v in series.items() if name == READS}
    print(f"3 x 200 requests answered in {sent:.1f} s; cache reads {reads}")
    assert series[(VIOLATIONS, "cache")] == 0 == series[(ERRORS, "cache")] and found == [], (series, [f.evidence for f in found])
    assert not any(v for kind, v in reads.items() if not kind.endswith("/same_content")), reads
    assert series[(CHECKS, "cache")] == sum(reads.values()), series
    # the caches were read: the same images' processed inputs, KV blocks and encoder rows, the system prompt's blocks
    # (its 80 requests of the second and third rounds find the first round's blocks cached, at least)
    assert reads["processor_cache/same_content"] >= 3 * 40 and reads["prefix_cache/same_content"] >= 80, reads
    assert reads["encoder_cache/same_content"] > 0, reads
