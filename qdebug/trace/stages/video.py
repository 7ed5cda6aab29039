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
    slices = prepared.video_slices or []
    stamped = any(len(r) > 1 for r in slices)
    stamps: list[list[str] | None] = list(slice_stamps(tok, prepared.text, ids, slices, loaded.config)) if stamped else [None] * len(slices)
    out = []
    for img, video, runs, stamp in zip(images, request.videos, slices, stamps):
        t = img.grid_thw[0]
        meta = video.metadata()
        out.append(VideoPrep(
            video=img.index, path=img.path, frames=len(video.frames), frame_indices=list(video.indices),
            frame_times=[round(x, 6) for x in video.times], source_fps=round(video.source_fps, 6),
            sampled_fps=round(float(meta.sampled_fps), 6), temporal_patch_size=tp, grid_thw=list(img.grid_thw),
            slice_times=slice_times(video.times, t, tp), runs=[list(r) for r in runs],
            pixel_values_videos_shape=list(inputs["pixel_values_videos"].shape) if "pixel_values_videos" in inputs else None,
            second_per_grid_ts=round(float(seconds[img.index]), 6) if seconds is not None else None,
            timestamps=stamp if len(runs) > 1 else None,
            # What Qwen3-VL's processor writes for these slice times (`<t seconds>`, through the tokenizer and back):
            # beside `timestamps`, a prompt stamped from other times (e.g. its fps=24 fallback) shows.
            expected_timestamps=[tok.decode(tok.encode(f"<{x:.1f} seconds>", add_special_tokens=False))
                                 for x in slice_times(video.times, t, tp)] if len(runs) > 1 else None,
            notes=list(video.notes) or None,
        ))
    return out


def slice_stamps(tok, text: str, ids: list[int], slices: list[list[tuple[int, int]]], config) -> list[list[str]]:
    """Per video, the text the processor wrote before each slice's run (Qwen3-VL's `<t seconds>`), read from its output.

    A later slice's stamp lies between the previous run's vision end and its own run's vision start, in every
    transformers. The first slice's left edge is where the processor's replacement began: the prompt text since the
    previous video (tokenized, as the processor tokenized it) precedes it, and then the chat template's outer vision
    start when the processor keeps it (transformers < 5.25) or the stamp itself (5.25 collapses that wrapper)."""
    start, end = getattr(config, "vision_start_token_id", None), getattr(config, "vision_end_token_id", None)
    segments = _prompt_segments(tok, text, config, len(slices))
    out, at = [], 0
    for v, runs in enumerate(slices):
        first = runs[0][0] - (ids[runs[0][0] - 1] == start)  # the first slice's own vision start
        seg = tok(segments[v], add_special_tokens=v == 0)["input_ids"] if v < len(segments) else []
        same = _common_prefix(ids[at:first], seg)
        kept = same == len(seg) and at + same + 1 < first and ids[at + same] == start  # the outer vision start, kept
        head = tok.decode(ids[at + same + kept:first])
        if same < len(seg):  # the prompt's last token and the stamp's first were one token: drop the prompt's part
            tail = tok.decode(seg[same:])
            head = head[len(tail):] if tail and head.startswith(tail) else head
        stamps = [head]
        for (_, prev_end), (s, _) in zip(runs, runs[1:]):
            stamps.append(tok.decode(ids[prev_end + (ids[prev_end] == end):s - (ids[s - 1] == start)]))
        out.append(stamps)
        last = runs[-1][1]
        at = last + (last < len(ids) and ids[last] == end)
        at += kept and at < len(ids) and ids[at] == end  # the outer vision end the kept wrapper closes with
    return out


def _prompt_segments(tok, text: str, config, count: int) -> list[str]:
    """The prompt text before each video's placeholder (the chat template's `<|vision_start|><|video_pad|><|vision_end|>`,
    or a bare `<|video_pad|>`), since the previous one: what the processor tokenized around its replacements."""
    pad, vs, ve = tok.convert_ids_to_tokens([config.video_token_id, config.vision_start_token_id, config.vision_end_token_id])
    out: list[str] = []
    prev = at = 0
    while len(out) < count and (i := text.find(pad, at)) >= 0:
        begin = i - len(vs) if text.startswith(vs, i - len(vs)) and i >= len(vs) else i
        out.append(text[prev:begin])
        at = i + len(pad)
        prev = at + len(ve) if text.startswith(ve, at) else at
    return out


def _common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading ids `a` and `b` share."""
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def video_sync(loaded, images: list[ImageInfo], encode_rows: list, rec, prepared, received, expected, first: int = 0,
               served: dict[int, str] | None = None) -> tuple[list[SyncVideo], list[Check]]:
    """Per video: rows vs placeholders, the rows at its placeholders vs its encode rows, and the temporal ids its rows
    received (`received`, measured from the position ids the decoder got) against get_rope_index's (`expected`).
    `first` > 0 (an engine trace after a prefix-cache hit): `embeds`, `received` and `expected` start at position
    `first`; a video's placeholders before it are not checked, and a video with none computed (its rows None) is said
    as `served[index]`."""
    import torch

    embeds = rec.embeds
    summaries, checks = [], []
    for img, rows, runs in zip(images, encode_rows, prepared.video_slices or []):
        positions = [p for s, e in runs for p in range(s, e)]
        i, n = img.index, len(positions)
        skip = sum(1 for p in positions if p < first)
        said = (served or {}).get(i) or f"{skip} placeholders served from the prefix cache" if skip else None
        if rows is None:  # served whole from the prefix cache: nothing of it was merged in this run
            summaries.append(SyncVideo(video=i, runs=[list(r) for r in runs], placeholders=n, expected=img.tokens, cached=said))
            continue
        mine, part = [p - first for p in positions[skip:]], rows[skip:]
        at = embeds[mine] if embeds is not None and mine and max(mine) < embeds.shape[0] else None
        same = at is not None and at.shape == part.shape
        match = float(cosine_rows(part, at)) if same else 0.0
        diff = float((at.float() - part.float()).abs().max()) if same and at is not None else None
        got = _per_slice(received, mine, img.grid_thw[0]) if not skip else None  # per slice: a whole video's only
        want = _per_slice(expected, mine, img.grid_thw[0]) if not skip else None
        summaries.append(SyncVideo(video=i, runs=[list(r) for r in runs], rows=rows.shape[0], placeholders=n, expected=img.tokens,
                                   match=round(match, 6), max_abs_diff=diff, temporal_ids=got, expected_temporal_ids=want,
                                   fingerprint=fingerprint(at) if at is not None else None, cached=said))
        checks.append(Check(f"video {i}: rows == placeholders == t·h·w/merge²", rows.shape[0] == n == img.tokens,
                            f"{rows.shape[0]} rows, {n} placeholders, {img.tokens} expected", FindingKind.SHAPE_MISMATCH))
        checks.append(Check(f"video {i}: merged rows equal encode rows", same and at is not None and bool(torch.equal(at, part.to(at.dtype))) and match >= SAME_ROWS,
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
