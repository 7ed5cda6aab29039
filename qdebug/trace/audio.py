"""Audio inputs: detect a clip by content, decode it with soundfile, resample to the feature extractor's rate."""

from __future__ import annotations

import base64
import binascii
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from pathlib import Path

from qdebug.errors import InputError
from qdebug.input_files import file_kind, require_file


if TYPE_CHECKING:
    from qdebug.model.load import LoadedModel

# Formats libsndfile decodes (mp3 since libsndfile 1.1); what `input_audio.format` may name.
FORMATS = ("wav", "flac", "ogg", "mp3")


class AudioError(InputError):
    """An audio clip is missing, corrupt or in a format qdebug cannot decode."""


@dataclass
class Clip:
    """A decoded mono clip at its source rate (resampled later, once the model's rate is known)."""

    samples: Any  # float32 numpy array, mono
    rate: int
    source: str

    def __post_init__(self) -> None:
        """Refuse samples no model can hear: a NaN or infinity would reach the features, the encoder and every
        layer, and the report would judge the arithmetic, not the request (a huge but finite sample is kept)."""
        import numpy as np

        bad = ~np.isfinite(np.asarray(self.samples))
        if bad.any():
            first = int(np.argmax(bad))
            raise AudioError(f"non-finite audio samples: {self.source} ({int(bad.sum())} NaN/Inf sample(s), the first at "
                             f"sample {first}, {first / self.rate if self.rate else 0:.3f} s); expected finite samples")

    @property
    def seconds(self) -> float:
        """Duration in seconds."""
        return len(self.samples) / self.rate if self.rate else 0.0

    def at_rate(self, rate: int) -> Any:
        """The samples resampled to `rate` (polyphase filter; exact when the rates already agree)."""
        import numpy as np

        if rate == self.rate:
            return np.asarray(self.samples, dtype=np.float32)
        from math import gcd

        from scipy.signal import resample_poly

        g = gcd(int(rate), int(self.rate))
        return resample_poly(self.samples, rate // g, self.rate // g).astype(np.float32)


# Qwen2-Audio's forward reads a prompt holding no two adjacent audio placeholders as one its processor never expanded
# (its legacy merge), and then fails: a lone clip of one row is not enough there.
ROWS_NEEDED = {"qwen2_audio": 2}


def require_rows(loaded: LoadedModel, clips: list[Clip]) -> None:
    """Refuse a clip too short for the encoder rows the model needs: the processor would give it no placeholder, and
    the request would fail later as a placeholder count. The minimum is the model's own: its feature extractor's hop
    (one frame per hop, the last one partial) and its tower's formula from frames to rows (`rows_for_frames`)."""
    fe = loaded.processor.feature_extractor
    rate, hop = int(fe.sampling_rate), int(fe.hop_length)
    rows = ROWS_NEEDED.get(str(getattr(loaded.config, "model_type", "")), 1)
    adapter: Any = loaded.adapter  # an audio adapter (Qwen2-Audio, Omni): the base Adapter has no rows_for_frames
    frames = next((f for f in range(1, 4097) if adapter.rows_for_frames(loaded.model, f) >= rows), None)
    if frames is None:
        return  # a tower that keeps no row for any short clip: the placeholder checks speak for it
    need = (frames - 1) * hop + 1
    for clip in clips:
        if len(clip.at_rate(rate)) < need:
            raise AudioError(f"audio too short: {clip.source} is {len(clip.samples)} sample(s) at {clip.rate} Hz ({clip.seconds:.4f} s); "
                             f"expected at least {need} samples at the feature extractor's {rate} Hz ({need / rate:.4f} s): "
                             f"{frames} feature frames, what the model needs for {rows} encoder row(s)")


def sniff_audio(head: bytes) -> str | None:
    """The audio container named by a file's first bytes (wav, flac, ogg, mp3), or None if not audio."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:4] == b"fLaC":
        return "flac"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def is_audio_file(path: str | Path) -> bool:
    """Whether `path` is an existing file whose content is an audio container (never judged by the name)."""
    p = Path(path)
    if file_kind(p):
        return False  # a FIFO or device: reading it could block; the image loader refuses it by name
    try:
        with p.open("rb") as fh:
            return sniff_audio(fh.read(16)) is not None
    except OSError:
        return False


def decode_audio(data: bytes, source: str) -> Clip:
    """Decode audio bytes (any format libsndfile reads) to a mono float32 clip; AudioError names `source`."""
    import numpy as np
    import soundfile as sf

    if sniff_audio(data[:16]) is None:
        raise AudioError(f"not an audio clip: {source} (expected WAV, FLAC, OGG or MP3 content)")
    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError) as exc:
        # libsndfile's own reason, without its "Error opening <_io.BytesIO object at 0x…>: " (our buffer, not the user's file)
        why = getattr(exc, "error_string", None) or re.sub(r"Error opening <[^>]*>:\s*", "", str(exc).splitlines()[0])
        raise AudioError(f"corrupt audio: {source} ({why.strip() or type(exc).__name__})") from None
    if samples.shape[0] == 0:
        raise AudioError(f"empty audio: {source} (expected at least one sample)")
    # channels averaged in float64: two huge but finite channels must not overflow float32 into an infinity
    return Clip(samples.mean(axis=1, dtype=np.float64).astype(np.float32), int(rate), source)


def load_audio(path: str | Path) -> Clip:
    """Read and decode an audio file; AudioError with the path on any failure."""
    p = Path(path)
    require_file(p, "audio", "WAV/FLAC", AudioError)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise AudioError(f"unreadable audio: {p} ({exc.strerror})") from None
    return decode_audio(data, str(p))


def decode_input_audio(part: object, where: str) -> Clip:
    """An OpenAI `input_audio` content part value (`{"data": base64, "format": "wav"|"mp3"|...}`) as a Clip."""
    if not isinstance(part, dict) or not isinstance(part.get("data"), str):
        raise AudioError(f"{where}: input_audio needs a base64 `data` string (and a `format`: {', '.join(FORMATS)})")
    fmt = part.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise AudioError(f"{where}: input_audio format {fmt!r} (expected one of {', '.join(FORMATS)})")
    try:
        data = base64.b64decode(part["data"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise AudioError(f"{where}: bad base64 in input_audio ({exc})") from None
    return decode_audio(data, f"{where} input_audio")


def envelope(samples, points: int = 512):
    """Peak |amplitude| of the clip in `points` equal slices (what a waveform strip draws), float32 tensor."""
    import numpy as np
    import torch

    x = np.abs(np.asarray(samples, dtype=np.float32))
    points = max(1, min(points, len(x)))
    edges = np.linspace(0, len(x), points + 1).astype(int)
    return torch.tensor([float(x[a:b].max()) if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:])])
