"""`preprocess`, `encode` and `sync` of a mixed-media request (Qwen2.5-Omni), one EncoderSpan per item, looping over
the encoders the adapter declares; every figure comes from the processor's inputs and the recorded encoder calls."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..media_rows import rows_gap, same_rows
from ..schema import Check, Stage
from ..stats import fingerprint
from ..summaries import EncodeSummary, EncoderSpan, PreprocessSummary, SyncSummary
from ..tensor_names import TensorKind as T, tensor_name
from .encode import kept_rows


def media_stages(loaded, request, prepared, rec, rows: dict, notes: list[str], tensors: dict) -> dict[str, Stage]:
    """The three input stages of a mixed-media request (`rows`, `notes`: `trace.media.item_rows` of its encoder calls)."""
    inputs, items = prepared.inputs, prepared.media
    spans = [_span(m) for m in items]
    preprocess = Stage(StageName.PREPROCESS, PreprocessSummary(
        text=prepared.text, num_tokens=len(inputs["input_ids"][0]),
        pixel_values_shape=list(inputs["pixel_values"].shape) if "pixel_values" in inputs else None,
        input_features_shape=list(inputs["input_features"].shape) if "input_features" in inputs else None,
        spans=[list(m.extent) for m in items], media=spans, use_audio_in_video=bool(request.use_audio_in_video) or None,
    ), [Check("every item's placeholders found", all(len(m.positions) == m.expected for m in items), kind=FindingKind.SHAPE_MISMATCH)])
    encode_spans, encode_checks = [], [Check(n, False, kind=FindingKind.SHAPE_MISMATCH) for n in notes]
    for m in items:
        r = rows.get(m.item)
        if r is None:
            continue
        fields, check = kept_rows(r, m.item, f"{m.modality} {m.index}", tensors)
        encode_spans.append(EncoderSpan(modality=m.modality, index=m.index, item=m.item, **fields))
        encode_checks.append(check)
    encode = Stage(StageName.ENCODE, EncodeSummary(media=encode_spans), encode_checks)
    return {StageName.PREPROCESS: preprocess, StageName.ENCODE: encode, StageName.SYNC: _sync(loaded, inputs, items, rows, rec, tensors)}


def _span(m) -> EncoderSpan:
    return EncoderSpan(modality=m.modality, index=m.index, item=m.item, source=m.source,
                       grid_thw=list(m.grid_thw) if m.grid_thw else None, frames=m.frames,
                       runs=[list(r) for r in m.runs], expected=m.expected)


def item_landed(span: EncoderSpan, rows, positions: list[int], embeds, first: int = 0, served: str | None = None) -> list[Check]:
    """Where one item's encoder `rows` landed among the decoder's input `embeds`: `span` gets its placeholder count and,
    at its own `positions`, whether they hold its rows bit for bit (NaN-aware: a NaN row copied into place is in place);
    returns the item's two checks (counts, and its rows at its own placeholders). `first` > 0 (an engine trace after a
    prefix-cache hit): `embeds` starts at position `first`, and only the item's placeholders from there are checked;
    an item with none computed (its rows None) is said as `served`, not checked."""
    span.placeholders = len(positions)
    skip = sum(1 for p in positions if p < first)
    if skip:
        span.cached = served or f"{skip} placeholders served from the prefix cache"
    if rows is None and skip and skip == len(positions):  # served whole from the prefix cache: nothing of it was merged here
        return []
    if rows is not None and embeds is not None and len(positions) == rows.shape[0] and skip < len(positions) and positions[-1] - first < embeds.shape[0]:
        at, part = embeds[[p - first for p in positions[skip:]]], rows[skip:]
        span.rows, span.exact, span.max_abs_diff, span.fingerprint = rows.shape[0], same_rows(at, part), rows_gap(at, part), fingerprint(at)
    name, got = f"{span.modality} {span.index}", None if rows is None else rows.shape[0]
    return [Check(f"{name}: rows == placeholders == expected", got is not None and got == len(positions) == span.expected,
                  f"{got} rows, {len(positions)} placeholders, {span.expected} expected", FindingKind.SHAPE_MISMATCH),
            Check(f"{name}: its rows at its own placeholders", bool(span.exact),
                  f"max |diff| {span.max_abs_diff}" if span.exact is not None else "not comparable", FindingKind.FINGERPRINT)]


def _sync(loaded, inputs, items, rows: dict, rec, tensors: dict) -> Stage:
    """Per item: its rows at its own placeholders, bit for bit; then the position ids the decoder received against the
    model's own (Omni's time-aligned MRoPE for a video with its sound included)."""
    import torch

    embeds = rec.embeds
    if embeds is not None:
        tensors[tensor_name(T.SYNC_EMBEDS)] = embeds
    spans, checks = [], []
    for m in items:
        span = _span(m)
        checks += item_landed(span, rows.get(m.item), m.positions, embeds)
        spans.append(span)
    summary = SyncSummary(media=spans)
    if rec.position_ids is not None:
        received = rec.position_ids.cpu()
        tensors[tensor_name(T.SYNC_POSITION_IDS)] = received
        summary.position_ids_shape = list(received.shape)
        device = {k: (v.to(loaded.device) if hasattr(v, "to") else v) for k, v in inputs.items()}
        expected, deltas = loaded.adapter.media_rope_index(loaded.model, device)
        expected = expected[:, 0].cpu()
        tensors[tensor_name(T.SYNC_EXPECTED_POSITION_IDS)] = expected
        summary.rope_deltas = [int(d) for d in deltas.view(-1).tolist()]
        same = expected.shape == received.shape and bool(torch.equal(expected, received))
        checks.append(Check("MRoPE position ids == get_rope_index", same,
                            "identical" if same else f"{int((expected != received).any(0).sum()) if expected.shape == received.shape else 'shape'} positions differ",
                            FindingKind.POSITION_IDS))
    return Stage(StageName.SYNC, summary, checks)
