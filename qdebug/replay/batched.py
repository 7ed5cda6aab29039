"""Batched re-execution: one real left-padded batch through `generate`, as dynamic batching does."""

from __future__ import annotations

from qdebug.trace.hooks import recording, to_cpu
from qdebug.trace.runner import placeholder_spans, prepare
from qdebug.vocab import EventKind


class BatchCapture:
    """A recorder for a batch: the prefill embeddings and first-token logits of every row, plus events."""

    def __init__(self, ids: list[str], spans: list[list[tuple[int, int]]], events):
        self.ids, self.spans, self.events = ids, spans, events
        self.embeds = None  # B × L × dim at prefill
        self.first_logits = None  # B × V
        self.calls = 0
        self.image_positions: list[int] = []

    def vision_input(self) -> None:
        for rid in self.ids:
            self.events.add(EventKind.ENCODE_START, rid)

    def vision_output(self, output):
        return None  # a batch has no shared buffer: nothing is written anywhere but the batch's own tensor

    def decoder_input(self, args, kwargs):
        self.calls += 1
        if self.calls == 1 and kwargs.get("inputs_embeds") is not None:
            self.embeds = to_cpu(kwargs["inputs_embeds"])  # the one device boundary: rows and references both on CPU
            for rid, spans in zip(self.ids, self.spans):
                if spans:
                    self.events.add(EventKind.SYNC, rid, offset=spans[0][0], tokens=sum(e - s for s, e in spans))
        return None

    def layer_output(self, layer, output) -> None:
        return None

    def decoder_output(self, output) -> None:
        return None

    def logits_output(self, logits) -> None:
        if self.first_logits is None:
            import torch

            self.first_logits = to_cpu(logits[:, -1], torch.float32)
            for rid in self.ids:
                self.events.add(EventKind.FIRST_TOKEN, rid)

    def attention_tap(self, call, proceed):
        return proceed(call.query, call.key, call.value)


def run_batched(loaded, items: list[tuple[str, object]], events) -> dict[str, dict]:
    """Generate all requests in one padded batch. Returns id → {text, ids, landed rows, first_logits, spans}."""
    import torch

    processor = loaded.processor
    texts = [prepare(loaded, req).text for _, req in items]
    images = [img for _, req in items for img in req.images]
    inputs = processor(text=texts, images=images or None, return_tensors="pt", padding=True, padding_side="left")
    image_token = loaded.adapter.image_token_id(loaded.config)
    spans = [placeholder_spans(row.tolist(), image_token) for row in inputs["input_ids"]]
    ids = [rid for rid, _ in items]
    capture = BatchCapture(ids, spans, events)
    max_new = max(req.max_new_tokens for _, req in items)
    device_inputs = {k: v.to(loaded.device) if hasattr(v, "to") else v for k, v in inputs.items()}
    with recording(loaded.model, loaded.adapter, capture), torch.inference_mode():
        out = loaded.model.generate(**device_inputs, max_new_tokens=max_new, do_sample=False)
    prompt_len = inputs["input_ids"].shape[1]
    eos = set(_as_list(loaded.model.generation_config.eos_token_id))
    results = {}
    for b, (rid, req) in enumerate(items):
        gen = out[b, prompt_len:].tolist()[: req.max_new_tokens]
        cut = next((i + 1 for i, t in enumerate(gen) if t in eos), len(gen))
        gen = gen[:cut]
        positions = [p for s, e in spans[b] for p in range(s, e)]
        landed = capture.embeds[b, positions].cpu() if capture.embeds is not None else None
        results[rid] = {
            "text": processor.tokenizer.decode(gen, skip_special_tokens=True),
            "ids": gen,
            "landed": landed,
            "first_logits": capture.first_logits[b].cpu() if capture.first_logits is not None else None,
            "text_offset": spans[b][0][0] if spans[b] else None,
            "spans": spans[b],
            "embeds": capture.embeds[b].cpu() if capture.embeds is not None else None,  # L × dim, what the decoder got
        }
    return results


def _as_list(value) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
