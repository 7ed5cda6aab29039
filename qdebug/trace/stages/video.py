"""A video request's parts of `preprocess` (frames sampled, temporal slices, grid) and `sync` (rows per video, temporal ids)."""

from __future__ import annotations

from qdebug.vocab import FindingKind

from ..schema import Check, ImageInfo
from ..stats import SAME_ROWS, cosine_rows, fingerprint
from ..summaries import SyncVideo, VideoPrep


def temporal_patch_size(loaded) -> int:
    """Frames per temporal slice, from the video processor (the vision config says the same)."""
    vp = getattr(loaded.processor, "video_processor", None)
    return int(getattr(vp, "temporal_patch_size", None) or loaded.config.vision_config.temporal_patch_size)


def slice_times(times: list[float], t: int, tp: int) -> list[float]:
    """Time of each temporal slice: the mean of its first and last frame's times, as Qwen3-VL's processor stamps a
    slice (a short last slice is padded with the last frame, as the processors pad it)."""
    last = len(times) - 1
    return [round((times[min(k * tp, last)] + times[min(k * tp + tp - 1, last)]) / 2, 6) for k in range(t)]


def video_preps(loaded, request, prepared, images: list[ImageInfo]) -> list[VideoPrep]:
    """One VideoPrep per video: frames sampled (indices, times), temporal patch size, grid, placeholder runs."""
    inputs, tp = prepared.inputs, temporal_patch_size(loaded)
    tok = loaded.processor.tokenizer
    ids = inputs["input_ids"][0].tolist()
    seconds = inputs.get("second_per_grid_ts")
    out = []
    for img, video, runs in zip(images, request.videos, prepared.video_slices or []):
        t = img.grid_thw[0]
        meta = video.metadata()
        out.append(VideoPrep(
            video=img.index, path=img.path, frames=len(video.frames), frame_indices=list(video.indices),
            frame_times=[round(x, 6) for x in video.times], source_fps=round(video.source_fps, 6),
            sampled_fps=round(float(meta.sampled_fps), 6), temporal_patch_size=tp, grid_thw=list(img.grid_thw),
            slice_times=slice_times(video.times, t, tp), runs=[list(r) for r in runs],
            pixel_values_videos_shape=list(inputs["pixel_values_videos"].shape) if "pixel_values_videos" in inputs else None,
            second_per_grid_ts=round(float(seconds[img.index]), 6) if seconds is not None else None,
            timestamps=_timestamps(tok, ids, runs, loaded.config) if len(runs) > 1 else None,
            # What Qwen3-VL's processor writes for these slice times (`<t seconds>`, through the tokenizer and back):
            # beside `timestamps`, a prompt stamped from other times (e.g. its fps=24 fallback) shows.
            expected_timestamps=[tok.decode(tok.encode(f"<{x:.1f} seconds>", add_special_tokens=False))
                                 for x in slice_times(video.times, t, tp)] if len(runs) > 1 else None,
            notes=list(video.notes) or None,
        ))
    return out


def _timestamps(tok, ids: list[int], runs, config) -> list[str]:
    """The text the processor wrote before each run (Qwen3-VL's `<t seconds>`), between the vision start/end tokens."""
    start, end = getattr(config, "vision_start_token_id", None), getattr(config, "vision_end_token_id", None)
    out = []
    for k, (s, _) in enumerate(runs):
        stop = runs[k - 1][1] if k else None
        i, chunk = s - 1, []
        if i >= 0 and ids[i] == start:  # the slice's own vision start
            i -= 1
        while i >= 0 and ids[i] not in (start, end) and (stop is None or i >= stop):
            chunk.append(ids[i])
            i -= 1
        out.append(tok.decode(chunk[::-1]))
    return out


def video_sync(loaded, images: list[ImageInfo], encode_rows: list, rec, prepared, received, expected) -> tuple[list[SyncVideo], list[Check]]:
    """Per video: rows vs placeholders, the rows at its placeholders vs its encode rows, and the temporal ids its rows
    received (`received`, measured from the position ids the decoder got) against get_rope_index's (`expected`)."""
    import torch

    embeds = rec.embeds
    summaries, checks = [], []
    for img, rows, runs in zip(images, encode_rows, prepared.video_slices or []):
        positions = [p for s, e in runs for p in range(s, e)]
        i, n = img.index, len(positions)
        at = embeds[positions] if embeds is not None and positions and max(positions) < embeds.shape[0] else None
        same = at is not None and at.shape == rows.shape
        match = float(cosine_rows(rows, at)) if same else 0.0
        diff = float((at.float() - rows.float()).abs().max()) if same else None
        got = _per_slice(received, positions, img.grid_thw[0])
        want = _per_slice(expected, positions, img.grid_thw[0])
        summaries.append(SyncVideo(video=i, runs=[list(r) for r in runs], rows=rows.shape[0], placeholders=n, expected=img.tokens,
                                   match=round(match, 6), max_abs_diff=diff, temporal_ids=got, expected_temporal_ids=want,
                                   fingerprint=fingerprint(at) if at is not None else None))
        checks.append(Check(f"video {i}: rows == placeholders == t·h·w/merge²", rows.shape[0] == n == img.tokens,
                            f"{rows.shape[0]} rows, {n} placeholders, {img.tokens} expected", FindingKind.SHAPE_MISMATCH))
        checks.append(Check(f"video {i}: merged rows equal encode rows", same and bool(torch.equal(at, rows.to(at.dtype))) and match >= SAME_ROWS,
                            f"max |diff| {diff}, cosine {match:.4f}", FindingKind.FINGERPRINT))
        if got is not None and want is not None:
            checks.append(Check(f"video {i}: temporal ids == get_rope_index", got == want,
                                f"received per slice {got}, expected {want}", FindingKind.POSITION_IDS))
    return summaries, checks


def _per_slice(position_ids, positions: list[int], t: int) -> list | None:
    """The temporal id (row 0 of the (t, h, w) ids) of each temporal slice's rows: one int, or the sorted distinct ids."""
    if position_ids is None or not positions or max(positions) >= position_ids.shape[-1] or len(positions) % t:
        return None
    ids = position_ids[0, positions].view(t, -1)
    out = []
    for row in ids:
        distinct = sorted({int(x) for x in row.tolist()})
        out.append(distinct[0] if len(distinct) == 1 else distinct)
    return out
