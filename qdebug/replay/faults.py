"""Injectable faults on the sync step, one small class each: `trace.protocols.Fault`s the Recorder calls.

A fault reports what it did itself to its request's event sink (`events(kind, **fields)`, a `RequestEvents`), never
through the recorder: trace/ knows no event kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qdebug.trace.protocols import FaultBase
from qdebug.vocab import EventKind, EventOrigin

from .shared_buffer import SharedVisualBuffer

if TYPE_CHECKING:
    from torch import Tensor


@dataclass
class OffsetShift(FaultBase):
    """Sync each image's visual rows `shift` positions off their placeholder span.

    The placeholders the rows left keep the `<|image_pad|>` embedding; rows pushed past either end of the sequence
    are dropped (and reported as an index out of bounds), as a runtime with the same bug would.
    """

    shift: int
    pad_embedding: Tensor  # 1 × dim embedding of the image placeholder token
    events: Callable[..., None]  # the request's event sink

    def on_decoder_input(self, rec, embeds):
        """Move the image rows; report the shift (and rows pushed off the sequence) as the fault's own events."""
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
        rec.sync_offset = rec.image_positions[0] + self.shift
        # The fault's own word, a label for reports; where the rows landed is measured from the embeddings.
        self.events(EventKind.DESYNC, offset=rec.sync_offset, text_offset=rec.image_positions[0], message=f"injected: offset-shift:{self.shift}",
                    origin=EventOrigin.FAULT)
        if not bool(inside.all()):
            bad = int(target[~inside][0])
            self.events(EventKind.INDEX_OUT_OF_BOUNDS, offset=bad, tokens=seq, message=f"injected: offset-shift:{self.shift} pushed rows past the sequence",
                        origin=EventOrigin.FAULT)
        return out


@dataclass
class SharedBufferClient(FaultBase):
    """The shared-visual-buffer fault as one request sees it: write after encode, read back at sync time.

    The buffer and its seeded schedule are shared by the wave of requests (qdebug.replay.shared_buffer)."""

    buffer: SharedVisualBuffer
    request_id: str
    events: Callable[..., None]  # the request's event sink (buffer writes, overwrites, mismatches)

    def on_encoded(self, rec, rows):
        """Write the rows to the shared buffer and hand the sync step whatever is there at this request's turn."""
        self.buffer.write(self.request_id, rows, self._label)
        landed, _ = self.buffer.read(self.request_id, rows.shape[0], self._label)
        return landed

    def _label(self, kind: EventKind, **fields) -> None:
        """The buffer's writes, overwrites and mismatches are this fault's own word about itself: labels, never evidence
        (whose rows landed is measured in the stream; an overwrite names only the buffer's last owner, not every waiter)."""
        self.events(kind, origin=EventOrigin.FAULT, **fields)


@dataclass
class TemporalIdsFlat(FaultBase):
    """Set the temporal position id of every visual row to 0 at prefill: what a pipeline that treats a video as one
    image does (every frame at the same time). Height and width ids and the text positions are left as they are."""

    # No event of its own: the sync stage measures the temporal ids the decoder received, which is the evidence.

    def on_position_ids(self, rec, position_ids):
        """The MRoPE ids with the temporal row zeroed at the visual rows; None when there is no MRoPE or no visual row."""
        import torch

        if position_ids.ndim != 3 or position_ids.shape[0] < 3 or not rec.image_positions:
            return None
        out = position_ids.clone()
        rows = torch.as_tensor(rec.image_positions, device=out.device)
        out[-3, :, rows] = 0  # (t, h, w) are the last three rows ([text; t; h; w] when generate adds a text row)
        return out
