"""Cache provenance in vLLM's front end (the API server process): what each client actually sent, fingerprinted by
qdebug, and which items the processor cache served.

Where it listens (vLLM 0.32; shared/DESIGN.md "Seams in vLLM"):
- `BaseMultiModalProcessor.apply` (wrapped): its `inputs.mm_data_items` are the decoded items the client sent
  (PIL images, video frames, audio samples), before any cache: each gets `cache_reads.fingerprint`; its
  `_get_cache_missing_items` (wrapped, same thread) says which of them the processor cache held (`is_cached` by the
  media hash) and so served. Both go into the returned prompt dict under `MEDIA_KEY`, which travels with it;
- `InputProcessor.process_inputs` (wrapped): the request's items in vLLM's order (by placeholder position, as its
  `mm_features` are built) and their fingerprints and processor-cache hits, into the request's
  `sampling_params.extra_args[cache_reads.MEDIA_ARG]`, which reaches the engine core and the worker. A client's own
  value there is replaced (or removed): only the front end says what it saw.
The media hash is vLLM's key; qdebug never uses it to judge, only to say which earlier item the processor cache
matched (the engine core keeps who processed it: engine/cache_core.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .cache_reads import MEDIA_ARG, fingerprint

log = logging.getLogger("vllm.qdebug")
MEDIA_KEY = "qdebug_media"  # the key in vLLM's prompt dict (a plain dict that reaches process_inputs unchanged)
_hits = threading.local()  # the processor-cache answer of the apply() running on this thread


def patch_processor(module) -> None:
    """Wrap `BaseMultiModalProcessor.apply` and its cache lookup (once)."""
    cls = getattr(module, "BaseMultiModalProcessor", None)
    if cls is None or getattr(cls.apply, "_qdebug", False):
        return
    apply, missing = cls.apply, cls._get_cache_missing_items

    def apply_and_print(self, inputs, *args, **kwargs):
        _hits.value = None
        try:
            out = apply(self, inputs, *args, **kwargs)
        finally:
            hits, _hits.value = getattr(_hits, "value", None), None
        try:
            if isinstance(out, dict) and out.get("type") == "multimodal":
                out[MEDIA_KEY] = media_seen(inputs.mm_data_items, hits)
        except Exception as exc:  # the request is served as without the plugin; its reads are then unverified
            log.warning("qdebug: media not fingerprinted (%s: %s)", type(exc).__name__, exc)
        return out

    def missing_and_note(self, cache, mm_data_items, mm_hashes, *args, **kwargs):
        result = missing(self, cache, mm_data_items, mm_hashes, *args, **kwargs)
        try:
            _hits.value = {modality: [bool(h) for h in cached] for modality, cached in result[0].items()}
        except Exception:  # an unknown shape: the hits stay unknown
            _hits.value = None
        return result

    for fn in (apply_and_print, missing_and_note):
        setattr(fn, "_qdebug", True)
    setattr(cls, "apply", apply_and_print)
    setattr(cls, "_get_cache_missing_items", missing_and_note)


def media_seen(items, hits: dict | None) -> dict:
    """Per modality, each item's fingerprint and whether the processor cache served it (None: not asked)."""
    out: dict[str, dict[str, list]] = {}
    for modality in list(items.keys()):
        group = items[modality]
        prints = [fingerprint(group.get(i)) for i in range(len(group))]
        served = (hits or {}).get(modality)
        out[modality] = {"prints": prints, "processor": list(served) if served is not None and len(served) == len(prints) else [None] * len(prints)}
    return out


def patch_input_processor(module) -> None:
    """Wrap `InputProcessor.process_inputs` (once; the async variant vLLM makes at init calls it)."""
    cls = getattr(module, "InputProcessor", None)
    if cls is None or getattr(cls.process_inputs, "_qdebug", False):
        return
    original = cls.process_inputs

    def process_inputs(self, request_id, prompt, params, *args, **kwargs):
        request = original(self, request_id, prompt, params, *args, **kwargs)
        try:
            attach_media(request, prompt)
        except Exception as exc:
            log.warning("qdebug: media fingerprints not attached (%s: %s)", type(exc).__name__, exc)
        return request

    setattr(process_inputs, "_qdebug", True)
    setattr(cls, "process_inputs", process_inputs)


def attach_media(request, prompt: Any) -> None:
    """Put the request's items' fingerprints and processor-cache hits, in its `mm_features` order, into its
    extra_args (replacing whatever the client put there)."""
    params = getattr(request, "sampling_params", None)
    if params is None:
        return
    extra = dict(params.extra_args or {})
    extra.pop(MEDIA_ARG, None)
    seen = prompt.get(MEDIA_KEY) if isinstance(prompt, dict) else None
    features = getattr(request, "mm_features", None) or []
    if seen and features:
        counters: dict[str, int] = {}
        prints, processor = [], []
        for feature in features:  # sorted by position; each modality's items keep their order within it
            modality = str(feature.modality)
            k = counters[modality] = counters.get(modality, -1) + 1
            group = seen.get(modality) or {}
            prints.append((group.get("prints") or [])[k] if k < len(group.get("prints") or []) else "")
            processor.append((group.get("processor") or [])[k] if k < len(group.get("processor") or []) else None)
        extra[MEDIA_ARG] = {"prints": prints, "processor": processor}
    params.extra_args = extra or None
