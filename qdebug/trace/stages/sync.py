"""`sync`: where each image's rows landed in the merged embeddings, and the MRoPE ids the decoder received."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..schema import Check, ImageInfo, Stage
from ..stats import SAME_ROWS, best_block_match, cosine_rows, fingerprint
from ..summaries import SyncImage, SyncSummary
from ..tensor_names import TensorKind as T, tensor_name


def sync_stage(loaded, images: list[ImageInfo], encode_rows: list, rec, inputs, tensors: dict, prepared=None, first: int = 0,
               served: dict[int, str] | None = None) -> Stage:
    """The stage: per image its text and visual offsets and whether the merged rows are its encode rows; then
    whether the position ids the decoder received are get_rope_index's. A video request (`prepared.video_slices`)
    is checked per video instead: rows per `<|video_pad|>` run and the temporal ids its rows received.

    An engine trace after a prefix-cache hit (`first` > 0: `rec.embeds` holds positions first..): an image's
    placeholders before `first` were not computed here, so only the rest are checked; an image with none computed
    (its encode rows None) is said as `served[index]` instead of checked."""
    embeds = rec.embeds
    if embeds is not None:
        tensors[tensor_name(T.SYNC_EMBEDS)] = embeds
    video = prepared is not None and prepared.video_slices is not None
    synced: list[SyncImage] = []
    summary, checks = SyncSummary(images=synced), []
    for img, rows in zip([] if video else images, encode_rows):
        image, image_checks = _image(img, rows, embeds, first, (served or {}).get(img.index))
        synced.append(image)
        checks.extend(image_checks)
    received = expected = None
    rope: list[Check] = []
    if rec.position_ids is not None:
        received = rec.position_ids.cpu()
        tensors[tensor_name(T.SYNC_POSITION_IDS)] = received
        summary.position_ids_shape = list(received.shape)
        if "image_grid_thw" in inputs or "video_grid_thw" in inputs:
            rope.append(_rope_check(loaded, inputs, received, summary, tensors))
            expected = tensors[tensor_name(T.SYNC_EXPECTED_POSITION_IDS)]
    if video:
        from .video import video_sync

        summary.videos, video_checks = video_sync(loaded, images, encode_rows, rec, prepared, received, expected)
        checks.extend(video_checks)
    return Stage(StageName.SYNC, summary, checks + rope)


def _image(img: ImageInfo, rows, embeds, first: int = 0, served: str | None = None) -> tuple[SyncImage, list[Check]]:
    """One image's landing place and its three checks (counts, offsets, bytes); `first`: the position `embeds` starts at
    (its placeholders before it were served from a prefix cache: only its computed part is looked for and checked)."""
    import torch

    if img.span is None:  # an item placed by the engine without a placeholder span: nothing to land on
        raise ValueError(f"image {img.index} has no placeholder span; sync needs one per image")
    start, end = img.span
    if rows is None:  # every placeholder served from the prefix cache: nothing of it was merged in this run
        return SyncImage(image=img.index, text_offset=start, visual_offset=None, placeholders=end - start, expected=img.tokens,
                         cached=served or "served from the prefix cache"), []
    skip = min(max(0, first - start), rows.shape[0])  # its first placeholders, not in this run's stream
    part, lo, hi = rows[skip:], start + skip - first, end - first  # its computed rows and the stream's rows [lo, hi) for them
    landed, score = _landed(part, embeds, lo, hi)
    if score < SAME_ROWS:  # the image's own rows are nowhere in the stream: it got someone else's
        landed = None
    if landed is not None:  # where its first row would be, as a prompt position
        landed += first - skip
    fits = embeds is not None and hi - lo == part.shape[0] and lo >= 0
    exact = fits and bool(torch.equal(embeds[lo:hi], part.to(embeds.dtype)))
    diff = float((embeds[lo:hi].float() - part.float()).abs().max()) if fits and part.shape[0] else None
    where = f" (positions {start + skip}..{end - 1}; the first {skip} served from the prefix cache)" if skip else ""
    summary = SyncImage(image=img.index, text_offset=start, visual_offset=landed, match=score, rows=rows.shape[0], placeholders=end - start,
                        expected=img.tokens, max_abs_diff=diff, fingerprint=fingerprint(embeds[lo:hi]) if fits else None,
                        cached=(served or f"{skip} placeholders served from the prefix cache") if skip else None)
    return summary, [
        Check(f"image {img.index}: rows == placeholders == t·h·w/merge²", rows.shape[0] == end - start == img.tokens,
              f"{rows.shape[0]} rows, {end - start} placeholders, {img.tokens} expected", FindingKind.SHAPE_MISMATCH),
        Check(f"image {img.index}: visual offset == text offset", landed == start,
              f"visual {landed}, text {start}" if landed is not None else f"its rows are not in the stream (text {start})", FindingKind.DESYNC),
        Check(f"image {img.index}: merged rows equal encode rows", exact, f"max |diff| {diff}{where}", FindingKind.FINGERPRINT),
    ]


def _rope_check(loaded, inputs, received, summary: SyncSummary, tensors: dict) -> Check:
    """Compare the received position ids with the model's own get_rope_index (and note its rope deltas)."""
    import torch

    # the family's own position function, image and video grids (and Qwen2.5-VL's second_per_grid_ts) by name
    expected, deltas = loaded.adapter.media_rope_index(loaded.model, {k: v.to(loaded.device) for k, v in inputs.items() if hasattr(v, "to")})
    expected = expected[:, 0].cpu()
    tensors[tensor_name(T.SYNC_EXPECTED_POSITION_IDS)] = expected
    summary.rope_deltas = [int(d) for d in deltas.view(-1).tolist()]
    same = expected.shape == received.shape and bool(torch.equal(expected, received))
    return Check("MRoPE position ids == get_rope_index", same,
                 "identical" if same else f"{int((expected != received).any(0).sum()) if expected.shape == received.shape else 'shape'} positions differ",
                 FindingKind.POSITION_IDS)


def _landed(rows, embeds, start: int, end: int):
    """(where the image's rows landed, match score): its own span first, so the same image twice in one
    request is found at each copy's own place; elsewhere only when its span does not hold them."""
    if embeds is None or rows.shape[0] == 0:
        return None, 0.0
    if end - start == rows.shape[0]:
        own = float(cosine_rows(rows, embeds[start:end]))
        if own >= SAME_ROWS:
            return start, own
    return best_block_match(rows, embeds)
