"""Video inputs: a folder of frames (sorted by name) or a video file decoded with PyAV, sampled to frames with indices and times."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from qdebug.errors import InputError
from qdebug.input_files import file_kind


FOLDER_FPS = 2.0  # a frame folder's rate when --fps is not given: the Qwen-VL video processors' own default
MAX_FRAMES = 64  # --max-frames default: enough for a debugger, bounded memory
# The frames a video keeps hold at most this many largest images' worth of pixels (Pillow's MAX_IMAGE_PIXELS, the image
# limit, ~89.5 M by default: 8 of them are ~716 M pixels, ~2.1 GB as RGB; 64 frames of 4K fit, 64 of 5K do not).
VIDEO_IMAGES = 8


class VideoError(InputError):
    """A video is missing, undecodable, empty, or its frames disagree in size."""


@dataclass
class Video:
    """Sampled frames of one video (PIL RGB, one size) with their source indices and times in seconds."""

    frames: list
    indices: list[int]  # each frame's index in the source (file frame number, or position in the sorted folder)
    times: list[float]  # each frame's time in the source, seconds
    source_fps: float  # the source's frame rate (a folder: the rate it was declared at)
    total_frames: int  # frames in the source before sampling
    source: str
    notes: list[str] = field(default_factory=list)
    audio: object = None  # its audio track (trace.audio.Clip), decoded only when asked (Qwen2.5-Omni's use_audio_in_video)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of every frame."""
        return self.frames[0].size

    def metadata(self):
        """transformers' VideoMetadata for these frames, so the processor's own timestamps (Qwen3-VL) and
        sampled rate (Qwen2.5-VL's second_per_grid_ts) follow the frames qdebug sampled."""
        from transformers.video_utils import VideoMetadata

        w, h = self.size
        return VideoMetadata(total_num_frames=self.total_frames, fps=self.source_fps, width=w, height=h,
                             duration=self.total_frames / self.source_fps, frames_indices=list(self.indices))


# First bytes of the containers PyAV (FFmpeg) is asked to open: MP4/MOV, Matroska/WebM, AVI, MPEG-TS/PS, FLV. A GIF stays an
# image (Pillow reads its first frame, as before); give its frames as a folder to trace it as a video.
_STILL_BRANDS = (b"avif", b"avis", b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1")  # ISO-BMFF images (AVIF, HEIC)


def sniff_video(head: bytes) -> str | None:
    """The video container named by a file's first bytes, or None (never judged by the name)."""
    if head[4:8] == b"ftyp" and head[8:12] not in _STILL_BRANDS or head[4:8] in (b"moov", b"mdat", b"wide", b"free"):
        return "mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "matroska"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    if head[:3] == b"FLV":
        return "flv"
    if head[:4] == b"\x00\x00\x01\xba" or (head[:1] == b"\x47" and len(head) > 188 and head[188:189] == b"\x47"):
        return "mpeg"
    return None


def is_video_source(path: str | Path) -> bool:
    """Whether `path` is a folder (of frames) or a regular file whose content is a video container."""
    p = Path(path)
    if p.is_dir():
        return True
    if not p.exists() or file_kind(p):
        return False
    try:
        with p.open("rb") as fh:
            return sniff_video(fh.read(200)) is not None
    except OSError:
        return False


def sample(total: int, source_fps: float, fps: float | None, max_frames: int) -> list[int]:
    """Source frame indices taken at `fps` (None: every frame), then at most `max_frames` spread evenly."""
    if fps is None or fps >= source_fps:
        picked = list(range(total))
    else:
        step = source_fps / fps
        picked, k = [], 0
        while round(k * step) < total:
            picked.append(int(round(k * step)))
            k += 1
    if len(picked) > max_frames:
        last = len(picked) - 1
        picked = [picked[round(i * last / (max_frames - 1))] if max_frames > 1 else picked[0] for i in range(max_frames)]
    return picked


def load_video(path: str | Path, *, fps: float | None = None, max_frames: int = MAX_FRAMES) -> Video:
    """Read a frame folder or a video file and sample it; VideoError naming the path on any failure."""
    p = Path(path)
    if fps is not None and not fps > 0:
        raise VideoError(f"--fps {fps}: expected a positive frame rate")
    if max_frames < 1:
        raise VideoError(f"--max-frames {max_frames}: expected at least 1")
    if not p.exists():
        raise VideoError(f"video not found: {p} (expected a video file or a folder of frames)")
    if p.is_dir():
        return _folder(p, fps, max_frames)
    kind = file_kind(p)
    if kind:  # opening a FIFO or device would block or read forever
        raise VideoError(f"video path is {kind}, not a regular file: {p} (expected a video file or a folder of frames)")
    return _file(p, fps, max_frames)


def check_frames(label: str, sizes: list[tuple[int, int]], max_frames: int) -> None:
    """Refuse, before decoding, a frame over the image pixel limit and kept frames over the video's (VIDEO_IMAGES
    largest images); `sizes` are the kept frames' (width, height) from headers or stream metadata."""
    from .image_input import max_pixels

    limit = max_pixels()
    if limit is None:  # Pillow's limit switched off (Image.MAX_IMAGE_PIXELS = None): so are these
        return
    for w, h in sizes:
        if w * h > limit:
            raise VideoError(f"video frame too large: {label} has frames of {w}×{h} = {w * h:,} pixels "
                             f"(expected at most {limit:,} per frame, the image limit; a decompression bomb?)")
    total = sum(w * h for w, h in sizes)
    if total > VIDEO_IMAGES * limit:
        w, h = sizes[0]
        raise VideoError(f"video too large: {label} keeps {len(sizes)} frame(s) of {w}×{h}, {total:,} pixels in all (expected at most "
                         f"{VIDEO_IMAGES * limit:,}; give fewer --max-frames than {max_frames}, a lower --fps, or a smaller video)")


def _header_sizes(paths: list[Path]) -> list[tuple[int, int]]:
    """Each image file's (width, height) from its header (Pillow opens lazily: nothing decoded); a file Pillow cannot
    open is left to the decoder, which names what is wrong with it."""
    from .image_input import open_checked

    sizes = []
    for path in paths:
        try:
            with open_checked(path, str(path)) as im:
                sizes.append(im.size)
        except InputError:  # over Pillow's own bomb limit: the image's one-line error
            raise
        except Exception:
            continue
    return sizes


def _folder(p: Path, fps: float | None, max_frames: int) -> Video:
    """Every regular file of the folder in name order is a frame; the folder plays at `fps` (default 2.0)."""
    from .request import load_image

    names = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
    if not names:
        raise VideoError(f"empty frame folder: {p} (expected image files, one per frame, in name order)")
    rate = fps if fps is not None else FOLDER_FPS
    picked = sample(len(names), rate, None, max_frames)
    check_frames(str(p), _header_sizes([names[i] for i in picked]), max_frames)
    frames = [load_image(names[i]) for i in picked]
    _same_size(frames, [str(names[i]) for i in picked], p)
    return Video(frames, picked, [i / rate for i in picked], rate, len(names), str(p),
                 [f"{len(names)} frames read as {rate:g} fps" + (f"; {len(picked)} kept (--max-frames {max_frames})" if len(picked) < len(names) else "")])


def decode_video_bytes(data: bytes, label: str, *, fps: float | None = None, max_frames: int = MAX_FRAMES) -> Video:
    """A video held in memory (a capture's data: URL) decoded with PyAV; VideoError naming `label`."""
    import io

    if sniff_video(data[:200]) is None:
        raise VideoError(f"not a video: {label} (expected MP4, WebM, AVI or another container FFmpeg reads)")
    return _file(Path(label), fps, max_frames, source=io.BytesIO(data))


def frames_video(frames: list, label: str, *, fps: float | None = None, max_frames: int = MAX_FRAMES) -> Video:
    """Decoded frames given one by one (vLLM's `data:video/jpeg;base64,F1,F2,...`) as a video at `fps` (default 2.0)."""
    if not frames:
        raise VideoError(f"empty video: {label} has no frames (expected at least one)")
    rate = fps if fps is not None else FOLDER_FPS
    picked = sample(len(frames), rate, None, max_frames)
    kept = [frames[i] for i in picked]
    check_frames(label, [f.size for f in kept], max_frames)
    _same_size(kept, [f"{label} frame {i}" for i in picked], Path(label))
    return Video(kept, picked, [i / rate for i in picked], rate, len(frames), label, [f"{len(frames)} frames read as {rate:g} fps"])


def _file(p: Path, fps: float | None, max_frames: int, source=None) -> Video:
    """Decode every frame with PyAV (so indices are exact), holding only those `sample` picks as RGB images.

    The frame count comes first from demuxing alone (no frame decoded), so the kept frames' pixels are checked from
    the stream's metadata before any decoding; each decoded frame is checked again before it is converted."""
    import av

    def opened():
        if source is not None:
            source.seek(0)
        return av.open(source if source is not None else str(p))

    try:
        with opened() as container:
            if not container.streams.video:
                raise VideoError(f"no video stream in {p} (expected a video file such as MP4 or WebM)")
            stream = container.streams.video[0]
            rate = float(stream.average_rate or stream.guessed_rate or 0) or None
            size = (int(stream.codec_context.width or 0), int(stream.codec_context.height or 0))
            check_frames(str(p), [size], max_frames)  # one frame over the limit: refused before demuxing all
            total = sum(1 for packet in container.demux(stream) if packet.size)
        if rate is None:
            raise VideoError(f"video {p} declares no frame rate (expected one in the file; or give a folder of frames with --fps)")
        picked = sample(total, rate, fps, max_frames)
        check_frames(str(p), [size] * len(picked), max_frames)
        kept, decoded = _decode(opened, set(picked), p, max_frames)
        if decoded != total:  # the decoder's count is the truth (a packet without a frame): pick again, decode again
            total, picked = decoded, sample(decoded, rate, fps, max_frames)
            if set(picked) - set(kept):
                kept, _ = _decode(opened, set(picked), p, max_frames)
    except VideoError:
        raise
    except Exception as exc:  # FFmpeg's errors (InvalidDataError, ...) on files that are not video or are cut short
        raise VideoError(f"undecodable video: {p} ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); "
                         "expected a video file PyAV/FFmpeg decodes or a folder of frames") from None
    if not total:
        raise VideoError(f"empty video: {p} has no decodable frames (expected at least one)")
    frames = [kept[i] for i in picked]
    _same_size(frames, [f"{p} frame {i}" for i in picked], p)
    return Video(frames, picked, [i / rate for i in picked], rate, total, str(p),
                 [f"{total} frames at {rate:g} fps; {len(picked)} sampled" + (f" at {fps:g} fps" if fps is not None else "")])


def _decode(opened, keep: set[int], p: Path, max_frames: int) -> tuple[dict, int]:
    """(frame index → RGB image for the indices in `keep`, frames decoded): the others are dropped as they come."""
    kept, sizes, count = {}, [], 0
    with opened() as container:
        for frame in container.decode(container.streams.video[0]):
            if count in keep:
                sizes.append((frame.width, frame.height))
                check_frames(str(p), sizes, max_frames)  # the bitstream may not say what the stream's metadata said
                kept[count] = frame.to_image().convert("RGB")
            count += 1
    return kept, count


def _same_size(frames: list, names: list[str], where: Path) -> None:
    """Refuse frames of different sizes: a video's frames share one grid."""
    first = frames[0].size
    for frame, name in zip(frames, names):
        if frame.size != first:
            raise VideoError(f"frames of different sizes in {where}: {name} is {frame.size[0]}×{frame.size[1]}, "
                             f"the first is {first[0]}×{first[1]} (expected one size for every frame)")
