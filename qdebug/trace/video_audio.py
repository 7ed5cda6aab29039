"""A video file's own audio track (Qwen2.5-Omni's `use_audio_in_video`), decoded with PyAV."""

from __future__ import annotations

from pathlib import Path

from .audio import Clip
from .video_input import VideoError


def audio_track(path: str | Path) -> Clip | None:
    """The file's first audio stream as a mono float32 clip at its own rate (None for a folder or a silent file)."""
    import av
    import numpy as np

    p = Path(path)
    if p.is_dir():
        return None
    try:
        with av.open(str(p)) as container:
            if not container.streams.audio:
                return None
            stream = container.streams.audio[0]
            rate = int(stream.rate or stream.sample_rate or 0)
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            chunks = [out.to_ndarray().reshape(-1) for frame in container.decode(stream) for out in resampler.resample(frame)]
            chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except Exception as exc:  # FFmpeg's errors on a damaged audio stream
        raise VideoError(f"undecodable audio track in {p} ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); "
                         "expected a video whose sound FFmpeg decodes") from None
    samples = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    if not len(samples) or not rate:
        return None
    return Clip(samples, rate, f"{p} (audio track)")
