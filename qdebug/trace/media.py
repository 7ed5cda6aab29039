"""Every media item of a request (images, clips, videos; several kinds at once on Qwen2.5-Omni): what the processor is
given, and where each item's placeholders landed, for every encoder the adapter declares.

Each modality's placeholders are filled by the model in sequence order with that modality's rows in item order
(`masked_scatter`), so an item's positions are the next `expected` positions of its token: its grid's t·h·w/merge²
rows (images, video) or the rows the model keeps for its unmasked feature frames (audio). With
`use_audio_in_video` a video's audio track is one more audio item, at the video's place in the message, and its
placeholders interleave with the video's in time chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from qdebug.errors import PlaceholderError

if TYPE_CHECKING:
    from .audio import Clip
    from .request import Request


@dataclass
class MediaItem:
    """One item of the request at its encoder: modality, its index there, its source and placeholder positions."""

    modality: str
    index: int
    item: int
    source: str
    expected: int
    grid_thw: tuple[int, int, int] | None = None
    frames: int | None = None
    positions: list[int] = field(default_factory=list)

    @property
    def runs(self) -> list[tuple[int, int]]:
        """[start, end) of each contiguous run of its positions."""
        out: list[tuple[int, int]] = []
        for p in self.positions:
            if out and out[-1][1] == p:
                out[-1] = (out[-1][0], p + 1)
            else:
                out.append((p, p + 1))
        return out

    @property
    def extent(self) -> tuple[int, int]:
        """[first position, last position + 1)."""
        return (self.positions[0], self.positions[-1] + 1) if self.positions else (0, 0)


def audio_slots(request: Request) -> list[tuple[Clip, int | None]]:
    """The audio the processor is given, in message order: (clip, None) for a clip, (track, v) for video v's own
    audio track when `use_audio_in_video` (the order the model fills `<|AUDIO|>` placeholders in)."""
    slots: list[tuple[Clip, int | None]] = []
    for kind, value in request.parts:
        index = cast(int, value)  # an item's part holds its index among the request's items of that kind
        if kind == "audio":
            slots.append((request.audios[index], None))
        elif kind == "video" and request.use_audio_in_video:
            track = request.videos[index].audio
            if track is None:
                raise PlaceholderError(f"video {index} ({request.video_paths[index]}) has no audio track; expected a video file "
                                       "with sound for --use-audio-in-video")
            slots.append((track, index))
    return slots


def media_kwargs(loaded, request) -> dict:
    """Processor arguments for every item: images, audio (clips and video tracks, at the feature extractor's rate)
    and videos (the frames qdebug sampled, at their sampled rate)."""
    processor = loaded.processor
    kwargs: dict = {}
    if request.images:
        kwargs["images"] = request.images
    slots = audio_slots(request)
    if slots:
        from .audio import require_rows

        require_rows(loaded, [clip for clip, _ in slots])
        rate = int(processor.feature_extractor.sampling_rate)
        kwargs.update(audio=[clip.at_rate(rate) for clip, _ in slots], sampling_rate=rate)
    if request.videos and not loaded.adapter.mixed_media:  # Qwen-VL: the frames with their own times (trace.video_prepare)
        from .video_prepare import video_kwargs

        kwargs.update(video_kwargs(loaded, request))
    elif request.videos:
        rates = {round(float(v.metadata().sampled_fps), 6) for v in request.videos}
        if len(rates) > 1:  # the Omni processor takes one rate for all videos (seconds per temporal patch)
            raise PlaceholderError(f"videos sampled at different rates {sorted(rates)} fps; expected one --fps for every video of a request")
        kwargs.update(videos=[v.frames for v in request.videos], do_sample_frames=False, fps=rates.pop())
        if request.use_audio_in_video:
            if processor_declares(processor, "load_audio_from_video"):
                kwargs.update(load_audio_from_video=True, audio_from_video_indices=[v for _, v in slots])
            else:  # transformers < 5.25 spells it use_audio_in_video (and drops an option it does not know silently)
                kwargs.update(use_audio_in_video=True)
    return kwargs


def processor_declares(processor, name: str) -> bool:
    """Whether the processor's own kwargs declaration (its TypedDicts, nested ones too) names option `name`: read from
    the loaded processor, never from a version string."""
    todo, seen = [getattr(type(processor), "valid_processor_kwargs", None)], []
    while todo:
        declared = todo.pop()
        if declared is None or declared in seen:
            continue
        seen.append(declared)
        hints = getattr(declared, "__annotations__", {})
        if name in hints:
            return True
        todo += [v for v in hints.values() if isinstance(v, type) and hasattr(v, "__annotations__")]
    return False


def media_items(loaded, request, inputs) -> list[MediaItem]:
    """Every item, by declared encoder then message order, with the positions its rows go to (PlaceholderError when the
    prompt's placeholders and the items disagree)."""
    config, adapter = loaded.config, loaded.adapter
    ids = inputs["input_ids"][0].tolist()
    merge = adapter.merge_size(config)
    frames = inputs["feature_attention_mask"].sum(-1).tolist() if "feature_attention_mask" in inputs else []
    items: list[MediaItem] = []
    for enc in adapter.encoders():
        token = enc.token_id(config)
        mine = _sources(request, enc.modality)
        positions = [i for i, t in enumerate(ids) if t == token] if token is not None else []
        if not mine:
            if positions:
                raise PlaceholderError(f"the templated prompt has {len(positions)} {enc.modality} placeholder(s) and the request "
                                       f"no {enc.modality}; expected placeholders only for the request's items")
            continue
        if token is None:
            raise PlaceholderError(f"{adapter.name} has no {enc.modality} placeholder ({enc.token_attr}); expected a model that reads {enc.modality}")
        if not positions:
            raise PlaceholderError(f"the templated prompt has no {enc.modality} placeholder for {len(mine)} {enc.modality} item(s); "
                                   f"expected the chat template to place each (a template without a {enc.modality} branch cannot)")
        at = 0
        for k, source in enumerate(mine):
            if enc.grid_key is not None:
                gt, gh, gw = (int(x) for x in inputs[enc.grid_key][k])
                grid = (gt, gh, gw)
                expected, kept = grid[0] * grid[1] * grid[2] // (merge * merge), None
            else:
                grid, kept = None, int(frames[k])
                expected = adapter.rows_for_frames(loaded.model, kept)
            item = MediaItem(enc.modality, k, len(items), source, expected, grid, kept, positions[at : at + expected])
            at += expected
            if len(item.positions) != expected:
                raise PlaceholderError(f"{enc.modality} {k} ({source}): {len(item.positions)} placeholder(s) left for its {expected} rows; "
                                       f"expected one placeholder per row")
            items.append(item)
        if at != len(positions):
            raise PlaceholderError(f"the templated prompt has {len(positions)} {enc.modality} placeholder(s) for {at} rows of "
                                   f"{len(mine)} {enc.modality} item(s); expected one placeholder per row")
    return items


def item_rows(loaded, inputs, items, calls) -> tuple[dict, list[str]]:
    """Each item's encoder rows (item → rows), for every family, and what could not be split. A vision call is the
    images' or the videos' by the grid it was given (the processor's `image_grid_thw` / `video_grid_thw`); an audio call
    holds every audio item's rows back to back (Omni), or one padded block per item (Qwen2-Audio's projector:
    items × most rows × dim, of which an item keeps its first `expected`)."""
    import torch

    out, notes = {}, []
    for enc in loaded.adapter.encoders():
        mine = [m for m in items if m.modality == enc.modality]
        if not mine:
            continue
        grids = inputs.get(enc.grid_key) if enc.grid_key else None
        found = [rows for module, grid, rows in calls if module == enc.module
                 and (grids is None or (grid is not None and grid.shape == grids.shape and torch.equal(grid, grids.cpu())))]
        if len(found) != 1:
            notes.append(f"{enc.modality}: {len(found)} call(s) of {enc.module} recorded for its items (expected 1)")
            continue
        rows, sizes = found[0], [m.expected for m in mine]
        if rows.ndim == 3:
            if rows.shape[0] != len(mine) or rows.shape[1] < max(sizes):
                notes.append(f"{enc.modality}: {rows.shape[0]} padded block(s) of {rows.shape[1]} encoder rows for {len(mine)} item(s) of {sizes} rows")
                continue
            out.update({m.item: rows[k, : m.expected] for k, m in enumerate(mine)})
        elif sum(sizes) != rows.shape[0]:
            notes.append(f"{enc.modality}: {rows.shape[0]} encoder rows for {sum(sizes)} placeholders {sizes}")
        else:
            out.update({m.item: r for m, r in zip(mine, torch.split(rows, sizes))})
    return out, notes


def _sources(request, modality: str) -> list[str]:
    """The names of the request's items of one modality, in message order (audio: the slots `audio_slots` gives)."""
    if modality == "image":
        return list(request.image_paths)
    if modality == "video":
        return list(request.video_paths)
    return [clip.source for clip, _ in audio_slots(request)]
