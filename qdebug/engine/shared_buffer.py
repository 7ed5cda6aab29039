"""Seed 000 inside vLLM: the visual rows of one scheduler step pass through one unlocked buffer on their way from
the encoder (cache) to the merge, written and read in an order drawn from the seed, so a request can read the rows
another request wrote over its own. Planted by `QDEBUG_VLLM_INJECT=shared-visual-buffer` (vllm_faults)."""

from __future__ import annotations

import logging

from qdebug.schedule import draw_schedule

log = logging.getLogger("vllm.qdebug")


class SharedStepBuffer:
    """Wraps the model's `embed_input_ids`: a step's multimodal items (in vLLM's request order) go through the buffer."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.steps = 0

    def install(self, model) -> None:
        """Wrap `model.embed_input_ids` (where vLLM merges the encoder's rows into the token embeddings)."""
        merge = model.embed_input_ids

        def embed_input_ids(input_ids, multimodal_embeddings=None, **kwargs):
            if multimodal_embeddings is not None and len(multimodal_embeddings) > 1:
                multimodal_embeddings = self.pass_through(list(multimodal_embeddings))
            return merge(input_ids, multimodal_embeddings, **kwargs)

        model.embed_input_ids = embed_input_ids

    def pass_through(self, items: list) -> list:
        """Each item's rows as read back from the shared buffer (offset 0), in the seeded order of writes and reads."""
        import torch

        self.steps += 1
        names = [str(i) for i in range(len(items))]
        buffer, out = None, list(items)
        for op, name in draw_schedule(names, self.seed * 1_000_003 + self.steps):
            rows = items[int(name)]
            n = rows.shape[0]
            if op == "write":
                if buffer is None or buffer.shape[0] < n or buffer.shape[1:] != rows.shape[1:]:
                    grown = torch.zeros((max(n, buffer.shape[0] if buffer is not None else 0), *rows.shape[1:]), dtype=rows.dtype, device=rows.device)
                    if buffer is not None and buffer.shape[1:] == rows.shape[1:]:
                        grown[: buffer.shape[0]] = buffer
                    buffer = grown
                buffer[:n] = rows
            else:
                assert buffer is not None  # draw_schedule puts each item's write before its read
                out[int(name)] = buffer[:n].clone()
        return out
