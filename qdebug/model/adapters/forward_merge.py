"""The decoder's input embeddings exactly as a model's own forward merges them: run it, stop at the decoder's door.

For families whose merge is not a helper qdebug can call (Qwen2-Audio's feature mask, Qwen2.5-Omni's three encoders),
and the shared audio-row formula of their Whisper-style towers.
"""

from __future__ import annotations

from collections.abc import Callable


class _Merged(Exception):
    """Raised by a one-shot hook to stop the forward once the merged embeddings exist."""

    def __init__(self, embeds):
        super().__init__("merged")
        self.embeds = embeds


def embeds_at_decoder(language_model, run: Callable[[], object]):
    """`inputs_embeds` the decoder would receive when `run()` calls the model's forward (which stops there)."""

    def stop(module, args, kwargs):
        raise _Merged(kwargs["inputs_embeds"])

    # prepend: stop before any other pre-hook (a recorder) counts this as a decoder call.
    handle = language_model.register_forward_pre_hook(stop, with_kwargs=True, prepend=True)
    try:
        run()
    except _Merged as merged:
        return merged.embeds
    finally:
        handle.remove()
    raise RuntimeError("the model's forward never reached its decoder")


def audio_rows_for_frames(audio_tower, frames: int) -> int:
    """Encoder rows a Whisper-style tower keeps for `frames` unmasked feature frames (the model's own formula)."""
    import torch

    _, rows = audio_tower._get_feat_extract_output_lengths(torch.tensor([frames]))
    return int(rows[0])
