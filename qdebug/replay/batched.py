"""Batched re-execution: one real left-padded batch through `generate`, as dynamic batching does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from qdebug.trace.hooks import recording, to_cpu
from qdebug.trace.protocols import SinkBase
from qdebug.trace.runner import placeholder_spans, prepare

from .events import EventLog

if TYPE_CHECKING:
    from torch import Tensor

    from qdebug.trace.request import Request


@dataclass
class BatchedRow:
    """One request's row of a batched run: its answer and what its decoder received (CPU tensors)."""

    text: str
    ids: list[int]  # generated token ids, up to and including the first end-of-sequence token
    spans: list[tuple[int, int]]  # [start, end) of each image placeholder span in the padded row
    text_offset: int | None  # where the first placeholder span starts (None without images)
    landed: Tensor | None  # rows found at the placeholder positions of the prefill embeddings (N × dim)
    first_logits: Tensor | None  # logits of the first generated token (V)
    embeds: Tensor | None  # the whole padded row of prefill embeddings (L × dim)


class BatchRecorder(SinkBase):
    """A RecorderSink for a batch: the prefill embeddings and first-token logits of every row, plus events."""

    def __init__(self, ids: list[str], spans: list[list[tuple[int, int]]], events: EventLog):
        self.ids, self.spans = ids, spans
        self.listeners = [events.for_request(rid) for rid in ids]
        self.embeds = None  # B × L × dim at prefill
        self.first_logits = None  # B × V
        self.calls = 0

    def vision_input(self) -> None:
        """Every row of the batch starts encoding."""
        for listener in self.listeners:
            listener.encode_started()

    def decoder_input(self, args, kwargs):
        """At prefill: keep the embeddings; every row with images reports where its rows were synced."""
        self.calls += 1
        if self.calls == 1 and kwargs.get("inputs_embeds") is not None:
            self.embeds = to_cpu(kwargs["inputs_embeds"])  # the one device boundary: rows and references both on CPU
            for listener, spans in zip(self.listeners, self.spans):
                if spans:
                    listener.rows_synced(spans[0][0], sum(e - s for s, e in spans))
        return None

    def logits_output(self, logits) -> None:
        """Keep the first token's logits of every row."""
        if self.first_logits is None:
            import torch

            self.first_logits = to_cpu(logits[:, -1], torch.float32)
            for listener in self.listeners:
                listener.first_token()


def run_batched(loaded, items: list[tuple[str, Request]], events: EventLog) -> dict[str, BatchedRow]:
    """Generate all requests in one padded batch; returns each request's row by id."""
    import torch

    processor = loaded.processor
    texts = [prepare(loaded, req).text for _, req in items]
    images = [img for _, req in items for img in req.images]
    inputs = processor(text=texts, images=images or None, return_tensors="pt", padding=True, padding_side="left")
    image_token = loaded.adapter.image_token_id(loaded.config)
    spans = [placeholder_spans(row.tolist(), image_token) for row in inputs["input_ids"]]
    ids = [rid for rid, _ in items]
    recorder = BatchRecorder(ids, spans, events)
    max_new = max(req.max_new_tokens for _, req in items)
    device_inputs = {k: v.to(loaded.device) if hasattr(v, "to") else v for k, v in inputs.items()}
    with recording(loaded.model, loaded.adapter, recorder), torch.inference_mode():
        out = loaded.model.generate(**device_inputs, max_new_tokens=max_new, do_sample=False)
    prompt_len = inputs["input_ids"].shape[1]
    eos = set(_as_list(loaded.model.generation_config.eos_token_id))
    results = {}
    for b, (rid, req) in enumerate(items):
        gen = out[b, prompt_len:].tolist()[: req.max_new_tokens]
        cut = next((i + 1 for i, t in enumerate(gen) if t in eos), len(gen))
        gen = gen[:cut]
        positions = [p for s, e in spans[b] for p in range(s, e)]
        results[rid] = BatchedRow(
            text=processor.tokenizer.decode(gen, skip_special_tokens=True),
            ids=gen,
            spans=spans[b],
            text_offset=spans[b][0][0] if spans[b] else None,
            landed=recorder.embeds[b, positions].cpu() if recorder.embeds is not None else None,
            first_logits=recorder.first_logits[b].cpu() if recorder.first_logits is not None else None,
            embeds=recorder.embeds[b].cpu() if recorder.embeds is not None else None,
        )
    return results


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
