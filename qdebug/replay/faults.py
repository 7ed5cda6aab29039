"""Injectable faults, one small class each: applied through the same taps and hooks as tracing."""

from __future__ import annotations

from dataclasses import dataclass

from qdebug.vocab import EventKind

from .shared_buffer import SharedVisualBuffer


def _layout_blind_kernel(module, query, key, value, attention_mask, scaling: float, **kwargs):
    """A kernel that takes axis 1 as heads and axis 2 as positions, whatever it is given (as FLA-style kernels do).

    Given [B, T, H, D] it attends across heads instead of positions; it applies no mask (the mask is laid out for
    positions). Returns the output in the kernel's usual [B, T', H', D] order, so the caller reshapes it without error.
    """
    import torch

    weights = torch.softmax(torch.matmul(query, key.transpose(2, 3)) * scaling, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


@dataclass
class HeadFirst:
    """In decoder layer `layer`, hand the kernel q/k/v in [B, T, H, D] where it expects [B, H, T, D].

    Key/value heads are repeated to the query head count first (so the shapes line up); applied at prefill only
    (a decode step has T = 1, where the swap does not change the shapes of q).
    """

    layer: int

    def __call__(self, call, proceed):
        if call.layer != self.layer or call.query.shape[2] <= 1:
            return proceed(call.query, call.key, call.value)
        groups = call.query.shape[1] // call.key.shape[1]
        key = call.key.repeat_interleave(groups, dim=1)
        value = call.value.repeat_interleave(groups, dim=1)
        return proceed(call.query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), kern=_layout_blind_kernel)


@dataclass
class OffsetShift:
    """Stitch each image's visual rows `shift` positions off their placeholder span.

    The placeholders the rows left keep the `<|image_pad|>` embedding; rows pushed past either end of the sequence
    are dropped (and reported as an index out of bounds), as a runtime with the same bug would.
    """

    shift: int
    pad_embedding: object  # 1 × dim embedding of the image placeholder token

    def on_decoder_input(self, rec, embeds):
        import torch

        if not self.shift or not rec.image_positions:
            return None
        seq = embeds.shape[1]
        out = embeds.clone()
        positions = torch.tensor(rec.image_positions, device=embeds.device)
        rows = embeds[0, positions].clone()
        out[0, positions] = self.pad_embedding.to(embeds.dtype)
        target = positions + self.shift
        inside = (target >= 0) & (target < seq)
        out[0, target[inside]] = rows[inside]
        rec.stitch_offset = rec.image_positions[0] + self.shift
        # The fault's own word, a label for reports; where the rows landed is measured from the embeddings.
        rec.notify(EventKind.DESYNC, offset=rec.stitch_offset, text_offset=rec.image_positions[0], message=f"injected: offset-shift:{self.shift}")
        if not bool(inside.all()):
            bad = int(target[~inside][0])
            rec.notify(EventKind.INDEX_OUT_OF_BOUNDS, offset=bad, tokens=seq, message=f"injected: offset-shift:{self.shift} pushed rows past the sequence")
        return out


@dataclass
class SharedBufferClient:
    """The shared-visual-buffer fault as one request sees it: write after encode, read back at stitch time.

    The buffer and its seeded schedule are shared by the wave of requests (qdebug.replay.shared_buffer)."""

    buffer: SharedVisualBuffer
    request_id: str

    def on_encoded(self, rec, rows):
        self.buffer.write(self.request_id, rows, rec.notify)
        landed, _ = self.buffer.read(self.request_id, rows.shape[0], rec.notify)
        return landed
