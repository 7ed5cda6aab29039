"""Faults of the cache class (`QDEBUG_VLLM_INJECT`), planted where vLLM keys its caches, for the tests of cache provenance:
a cache that hands one request another's media because its key is not the content.

- `short-media-hash[:CHARS]` (front end): every media hash vLLM computes keeps only its first CHARS hex characters
  (default 0: one key per modality), as a truncated or colliding hash does (a 16-bit key, a hash cut for a log
  field). The processor cache, the encoder cache and the prefix cache's block keys all take it: different images of
  one size collide everywhere.
- `encoder-cache-by-size` (engine core): the encoder cache keys an item by its modality and size (placeholder
  count) instead of its content hash, after the prefix cache's block keys were made: only the encoder cache (its
  manager in the scheduler and the worker's store) confuses different items of one size.

What a fault says about itself (one log line) is a label; qdebug's findings come from provenance and its own
fingerprints (engine/cache_reads.py), never from these names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("vllm.qdebug")
PRESETS = ("short-media-hash[:CHARS]", "encoder-cache-by-size")
SHORT_PREFIX = "qdebug-short-"


def is_cache_fault(name: str) -> bool:
    """Whether a QDEBUG_VLLM_INJECT value names a fault of this module."""
    return name == "encoder-cache-by-size" or name == "short-media-hash" or name.startswith("short-media-hash:")


def patches(name: str) -> dict[str, Callable]:
    """What fault `name` patches, by vLLM module (each process patches what it imports); {} and a log line for a bad
    argument."""
    if name.startswith("short-media-hash"):
        chars = name.partition(":")[2] or "0"
        if not chars.isdigit() or int(chars) > 64:
            log.error("qdebug: QDEBUG_VLLM_INJECT=%s: expected short-media-hash:CHARS with CHARS in 0..64; nothing injected", name[:80])
            return {}
        return {"vllm.multimodal.processing.processor": lambda module: _short_hashes(module, int(chars))}
    if name == "encoder-cache-by-size":
        return {"vllm.v1.core.sched.scheduler": _by_size}
    return {}


def _short_hashes(module, chars: int) -> None:
    cls = getattr(module, "BaseMultiModalProcessor", None)
    if cls is None or getattr(cls._get_mm_hashes, "_qdebug_fault", False):
        return
    original = cls._get_mm_hashes

    def _get_mm_hashes(self, inputs, *args, **kwargs):
        hashes = original(self, inputs, *args, **kwargs)
        return {modality: [f"{SHORT_PREFIX}{modality}-{str(h)[:chars]}" for h in values] for modality, values in hashes.items()}

    setattr(_get_mm_hashes, "_qdebug_fault", True)
    setattr(cls, "_get_mm_hashes", _get_mm_hashes)
    log.warning("qdebug: injected fault short-media-hash (media hashes cut to %d characters) in this process", chars)


def _by_size(module) -> None:
    cls = getattr(module, "Scheduler", None)
    if cls is None or getattr(cls.add_request, "_qdebug_fault", False):
        return
    original = cls.add_request

    def add_request(self, request, *args, **kwargs):
        for feature in getattr(request, "mm_features", None) or []:  # the block keys were made when the request was
            feature.identifier = f"{feature.modality}-{int(feature.mm_position.length)}"
        return original(self, request, *args, **kwargs)

    setattr(add_request, "_qdebug_fault", True)
    setattr(cls, "add_request", add_request)
    log.warning("qdebug: injected fault encoder-cache-by-size (the encoder cache keys items by modality and size)")
