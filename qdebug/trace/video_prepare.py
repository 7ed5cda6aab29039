"""What the processor is given for videos, and where each video's `<|video_pad|>` runs landed in the templated prompt."""

from __future__ import annotations

from qdebug.errors import PlaceholderError


def video_token_id(config) -> int | None:
    """Id of the per-row video placeholder token (`<|video_pad|>`), or None for a model without one."""
    value = getattr(config, "video_token_id", None)
    return int(value) if isinstance(value, int) else None


def video_kwargs(loaded, request) -> dict:
    """Processor arguments for the request's videos: the frames qdebug sampled, unsampled again, with their metadata
    (the processor's own timestamps and sampled rate then follow qdebug's frame indices and times)."""
    if video_token_id(loaded.config) is None or getattr(loaded.processor, "video_processor", None) is None:
        raise PlaceholderError(f"{loaded.adapter.name} has no video placeholder (no video_token_id or "
                               "video processor); expected a Qwen-VL model (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) for a video")
    return {"videos": [v.frames for v in request.videos], "video_metadata": [v.metadata() for v in request.videos],
            "do_sample_frames": False}


def video_spans(loaded, inputs, count: int, runs: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]:
    """(each video's [first, last) placeholder extent, each video's runs of `<|video_pad|>`): the `runs` of the
    prompt grouped by the rows each video's grid asks for (t·h·w / merge²); PlaceholderError when they disagree."""
    grids = inputs.get("video_grid_thw")
    if not runs or grids is None:
        raise PlaceholderError(f"the templated prompt has no <|video_pad|> placeholder for {count} video(s); expected the chat "
                               "template to place each video (a template without a video branch cannot)")
    merge = loaded.adapter.merge_size(loaded.config)
    slices, at = [], 0
    for i in range(count):
        t, h, w = (int(x) for x in grids[i])
        want, got, mine = t * h * w // (merge * merge), 0, []
        while at < len(runs) and got < want:
            mine.append(runs[at])
            got += runs[at][1] - runs[at][0]
            at += 1
        if got != want:
            raise PlaceholderError(f"video {i}: {got} <|video_pad|> placeholders for grid {t}×{h}×{w} "
                                   f"(expected t·h·w/merge² = {want})")
        slices.append(mine)
    if at != len(runs) or len(slices) != count:
        raise PlaceholderError(f"the templated prompt has {len(runs)} <|video_pad|> run(s) for {count} video(s); expected every run to belong to one")
    return [(runs_[0][0], runs_[-1][1]) for runs_ in slices], slices
