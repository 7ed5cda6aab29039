"""Typed stage summaries: one dataclass per stage, written to JSON exactly as the dicts they replaced.

Fields are in JSON key order. A field left None is not written, except fields marked `NULLABLE`, which are
written as null; a NULLABLE field whose key only some summaries have defaults to `ABSENT` (then not written). Keys this qdebug does not know (an older or hand-edited
file) are kept in `extra` and written after the known ones, so any JSON object loads as a summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from qdebug.vocab import StageName


class _Absent:
    """The type of `ABSENT`."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()  # a NULLABLE key that is not in this summary's JSON at all
NULLABLE = {"nullable": True}


@dataclass
class Summary:
    """A stage summary with no known keys (and the base of the typed ones)."""

    extra: dict = field(default_factory=dict, kw_only=True)

    def to_json(self) -> dict:
        """As the stage's `summary` object."""
        out: dict = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or value is ABSENT or (value is None and not f.metadata.get("nullable")):
                continue
            if isinstance(value, TensorStats):  # statistics sit beside the summary's own keys
                out.update(value.to_json())
            else:
                out[f.name] = [v.to_json() if isinstance(v, Summary) else v for v in value] if isinstance(value, list) else value
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: dict):
        """From a stage's `summary` object; values of an unexpected shape are kept as they are."""
        rest = dict(data)
        kw: dict[str, Any] = {}
        for f in fields(cls):
            item = f.metadata.get("item")
            if f.name == "extra":
                continue
            if f.metadata.get("stats"):
                if all(k in rest for k in STAT_KEYS):
                    kw[f.name] = TensorStats(**{k: rest.pop(k) for k in STAT_KEYS})
            elif f.name in rest:
                value = rest.pop(f.name)
                typed = isinstance(value, list) and all(isinstance(v, dict) for v in value)
                kw[f.name] = [item.from_json(v) for v in value] if item is not None and typed else value
        return cls(**kw, extra=rest)


@dataclass
class TensorStats(Summary):
    """mean, std, max |x|, mean and max row norm, NaN and Inf counts of a `rows × dim` tensor."""

    shape: list[int] | None = None
    mean: float | None = None
    std: float | None = None
    max_abs: float | None = None
    norm_mean: float | None = None
    norm_max: float | None = None
    nan: int | None = None
    inf: int | None = None


STAT_KEYS = tuple(f.name for f in fields(TensorStats) if f.name != "extra")
_STATS = {"stats": True}


@dataclass
class VideoPrep(Summary):
    """One video as the processor took it: the frames sampled (source indices, times), its temporal patches and grid."""

    video: int | None = None
    path: str | None = None
    frames: int | None = None  # frames sampled and handed to the processor
    frame_indices: list[int] | None = None  # each frame's index in the source
    frame_times: list[float] | None = None  # each frame's time in the source, seconds
    source_fps: float | None = None
    sampled_fps: float | None = None  # the rate of the sampled frames (what Qwen2.5-VL's second_per_grid_ts is made from)
    temporal_patch_size: int | None = None  # frames per temporal slice
    grid_thw: list[int] | None = None  # vision patches (t, h, w)
    slice_times: list[float] | None = None  # each temporal slice's time (mean of its first and last frame's), seconds
    runs: list[list[int]] | None = None  # [start, end) of each run of `<|video_pad|>` (Qwen3-VL: one per slice)
    pixel_values_videos_shape: list[int] | None = None
    second_per_grid_ts: float | None = None  # Qwen2.5-VL: seconds per temporal slice, as the processor gave it
    timestamps: list[str] | None = None  # Qwen3-VL: the text the processor wrote before each slice (`<t seconds>`)
    expected_timestamps: list[str] | None = None  # Qwen3-VL: `<t seconds>` of each slice time, as its tokenizer reads it
    notes: list[str] | None = None


@dataclass
class EncoderSpan(Summary):
    """One item of a mixed-media request (Qwen2.5-Omni) at its encoder: which modality and item, where its placeholders
    are, how many rows its grid or feature mask asks for, and (encode, sync) what its encoder gave and where it landed."""

    modality: str | None = None  # image | video | audio (the declaring adapter's `Encoder.modality`)
    index: int | None = None  # the item among its modality's items, in message order
    item: int | None = None  # the item among all of the request's items (tensor `encode.<item>`)
    source: str | None = None
    grid_thw: list[int] | None = None  # images and video: vision patches (t, h, w)
    frames: int | None = None  # audio: feature frames the mask keeps
    runs: list[list[int]] | None = None  # [start, end) of each run of its placeholder (a video's audio interleaves in chunks)
    expected: int | None = None  # rows its grid (t·h·w / merge²) or feature mask asks for
    rows: int | None = None  # rows its encoder gave
    dim: int | None = None
    stats: TensorStats | None = field(default=None, metadata=_STATS)
    placeholders: int | None = None
    exact: bool | None = None  # sync: the rows at its placeholders are its encoder rows, bit for bit
    max_abs_diff: float | None = None
    fingerprint: str | None = None
    cached: str | None = None  # an engine trace: its placeholders (all, or its first ones) served from the prefix cache, in words


@dataclass
class PreprocessSummary(Summary):
    """What the processor made of the request: the chat text, token count, and image grids or audio frames."""

    text: str | None = None
    num_tokens: int | None = None
    pixel_values_shape: list[int] | None | _Absent = field(default=ABSENT, metadata=NULLABLE)  # images
    input_features_shape: list[int] | None | _Absent = field(default=ABSENT, metadata=NULLABLE)  # audio
    image_grid_thw: list[list[int]] | None = None
    frames_kept: list[int] | None = None  # audio: feature frames the mask keeps per clip
    spans: list | None = None  # [start, end) of each image's (clip's) placeholder tokens
    image_notes: list[str] | None = None  # what loading did to an image (EXIF orientation, transparency), one line each
    videos: list[VideoPrep] | None = field(default=None, metadata={"item": VideoPrep})  # video requests only
    media: list[EncoderSpan] | None = field(default=None, metadata={"item": EncoderSpan})  # mixed-media requests only
    use_audio_in_video: bool | None = None  # mixed-media: each video's own audio track interleaved with its frames


@dataclass
class EncodeImage(Summary):
    """One image's merged rows from the vision tower."""

    image: int | None = None
    rows: int | None = None
    dim: int | None = None
    stats: TensorStats | None = field(default=None, metadata=_STATS)
    fingerprint: str | None = None
    cached: str | None = None  # an engine trace: every placeholder of it was served from the prefix cache (words); no rows here


@dataclass
class EncodeClip(Summary):
    """One audio clip's rows from the audio tower's projector."""

    audio: int | None = None
    rows: int | None = None
    rows_out: int | None = None  # rows the projector produced before the mask
    dim: int | None = None
    stats: TensorStats | None = field(default=None, metadata=_STATS)
    fingerprint: str | None = None
    cached: str | None = None  # an engine trace: every placeholder of it was served from the prefix cache (words); no rows here


@dataclass
class EncodeSummary(Summary):
    """The encoder's output, per image (or per clip for audio families)."""

    images: list[EncodeImage] | None = field(default=None, metadata={"item": EncodeImage})
    audio: list[EncodeClip] | None = field(default=None, metadata={"item": EncodeClip})
    media: list[EncoderSpan] | None = field(default=None, metadata={"item": EncoderSpan})  # mixed-media requests only


@dataclass
class SyncImage(Summary):
    """Where one image's rows landed in the merged embeddings, against where its placeholders are."""

    image: int | None = None
    text_offset: int | None = None
    visual_offset: int | None = field(default=None, metadata=NULLABLE)  # None: its rows are not in the stream
    match: float | None = None  # mean cosine of the best-matching block
    rows: int | None = None
    placeholders: int | None = None
    expected: int | None = None  # t·h·w / merge²
    max_abs_diff: float | None = field(default=None, metadata=NULLABLE)
    fingerprint: str | None = field(default=None, metadata=NULLABLE)
    cached: str | None = None  # an engine trace: its placeholders (all, or its first ones) served from the prefix cache, in words


@dataclass
class SyncClip(Summary):
    """Where one audio clip's rows landed in the merged embeddings."""

    audio: int | None = None
    text_offset: int | None = None
    audio_offset: int | None = field(default=None, metadata=NULLABLE)
    match: float | None = None
    rows: int | None = None
    placeholders: int | None = None
    frames: int | None = None
    max_abs_diff: float | None = field(default=None, metadata=NULLABLE)
    cached: str | None = None  # an engine trace: its placeholders (all, or its first ones) served from the prefix cache, in words


@dataclass
class SyncVideo(Summary):
    """Where one video's rows landed (its `<|video_pad|>` runs) and the temporal position ids its rows received."""

    video: int | None = None
    runs: list[list[int]] | None = None
    rows: int | None = None
    placeholders: int | None = None
    expected: int | None = None  # t·h·w / merge²
    match: float | None = None  # mean cosine between the encode rows and the rows at its placeholders
    max_abs_diff: float | None = field(default=None, metadata=NULLABLE)
    temporal_ids: list | None = None  # per temporal slice: the temporal id its rows received (a list when they differ)
    expected_temporal_ids: list | None = None  # the same from the model's own get_rope_index
    fingerprint: str | None = field(default=None, metadata=NULLABLE)
    cached: str | None = None  # an engine trace: its placeholders (all, or its first ones) served from the prefix cache, in words


@dataclass
class SyncSummary(Summary):
    """The merge of encoder rows into the token stream, and the position ids the decoder received."""

    images: list[SyncImage] | None = field(default=None, metadata={"item": SyncImage})
    audio: list[SyncClip] | None = field(default=None, metadata={"item": SyncClip})
    position_ids_shape: list[int] | None = None
    rope_deltas: list[int] | None = None
    position_rows: int | None = None  # Qwen3.5: 4 rows of position ids (text row first)
    videos: list[SyncVideo] | None = field(default=None, metadata={"item": SyncVideo})  # video requests only
    media: list[EncoderSpan] | None = field(default=None, metadata={"item": EncoderSpan})  # mixed-media requests only


@dataclass
class LayerSummary(Summary):
    """One decoder layer: statistics of its output, the attention it kept, and family evidence."""

    layer: int | None = None
    stats: TensorStats | None = field(default=None, metadata=_STATS)
    attn_shape: list[int] | None = None
    kind: str | None = None  # Qwen3.5: linear_attention or full_attention
    linear_attention: dict | None = None  # Qwen3.5: the kernel's inputs and state (trace.linear_record)
    deepstack: dict | None = None  # Qwen3-VL: what was added after this layer (trace.deepstack_record)


@dataclass
class LogitsSummary(Summary):
    """Top-k over the prompt positions (or the last one only)."""

    positions: int | None = None
    k: int | None = None
    last_topk: list[str] | None = None
    prompt_topk: str | None = None  # "last position only" when the whole prompt was not scored


@dataclass
class StepSummary(Summary):
    """Generation step K: the chosen token, its probability and the entropy, processed and raw."""

    token: str | None = None
    token_id: int | None = None
    prob: float | None = None
    entropy: float | None = None
    raw_prob: float | None = None
    raw_entropy: float | None = None


_FIXED = {StageName.PREPROCESS: PreprocessSummary, StageName.ENCODE: EncodeSummary, StageName.SYNC: SyncSummary, StageName.LOGITS: LogitsSummary}


def summary_type(stage: str) -> type[Summary]:
    """The summary class of stage `stage` (`Summary` for a name qdebug does not write)."""
    if stage in _FIXED:
        return _FIXED[StageName(stage)]
    head, _, index = stage.partition(".")
    if index.isdigit():
        return {"layer": LayerSummary, "step": StepSummary}.get(head, Summary)
    return Summary


def summary_from_json(stage: str, data: dict) -> Summary:
    """The typed summary of stage `stage` from its JSON object."""
    return summary_type(stage).from_json(data)
