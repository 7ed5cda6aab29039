"""Untagged concurrent traffic for the watch tests: distinct images (so no two requests share an encoder-cache entry)
sent at once to a real vLLM, and what the watch reports about them (/metrics, the findings log)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from .client import PROMPT


def distinct_images(folder: Path, n: int, seed: int = 0) -> list[Path]:
    """`n` PNGs of the sample scenes' size, each a different random picture."""
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        path = folder / f"img-{seed}-{i:04d}.png"
        Image.fromarray(rng.integers(0, 256, (112, 168, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def body_for(path: Path, max_tokens: int) -> dict:
    """The chat body qdebug's replay sends for one image and the sample prompt (untagged: no vllm_xargs)."""
    from qdebug.replay.endpoint import chat_body
    from qdebug.trace.request import build_request, load_image

    return chat_body(build_request(PROMPT, [str(path)], images=[load_image(str(path))], max_new_tokens=max_tokens), "demo", top_logprobs=0)


def burst(server, paths: list[Path], concurrency: int, max_tokens: int = 4) -> list[str]:
    """Send one request per image, `concurrency` at a time; the answers, in the images' order."""
    return send_all(server, [body_for(p, max_tokens) for p in paths], concurrency)


def send_all(server, bodies: list[dict], concurrency: int) -> list[str]:
    """POST each chat body, `concurrency` at a time; the answers, in the bodies' order (each must be HTTP 200)."""
    return asyncio.run(_send_all(f"{server.url}/v1/chat/completions", bodies, concurrency))


async def _send_all(url: str, bodies: list[dict], concurrency: int) -> list[str]:
    """POST every body, `concurrency` in flight, on one event loop: the way replay --endpoint sends a burst. (A sync
    httpx.Client shared by 200 threads once failed with EBADF: its pool closed a socket another thread was reading.)"""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def one(body: dict) -> str:
            async with gate:
                response = await client.post(url, json=body)
            assert response.status_code == 200, response.text
            return response.json()["choices"][0]["message"]["content"]

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def watch_series(server) -> dict[tuple[str, str], float]:
    """The qdebug_watch_* samples on the server's /metrics: (series, label) → value, the label being the `check`
    label's value, or the others' values joined by `/` (`qdebug_watch_cache_reads_total`: `prefix_cache/same_content`),
    or "" for none."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    out = {}
    for m in re.finditer(r'^(qdebug_watch_\w+?)(?:\{([^}]*)\})? ([0-9.eE+-]+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="(\w*)"', m.group(2) or ""))
        out[(m.group(1), labels.get("check", "/".join(labels.values())))] = float(m.group(3))
    return out
