"""`encode` of an image or a Qwen-VL video request: each item's rows as its encoder produced them."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..schema import Check, ImageInfo, Stage
from ..stats import fingerprint, tensor_stats
from ..summaries import EncodeImage, EncodeSummary, TensorStats
from ..tensor_names import TensorKind as T, tensor_name


def encode_stage(rows: dict, notes: list[str], images: list[ImageInfo], tensors: dict,
                 served: dict[int, str] | None = None) -> tuple[Stage, list]:
    """The stage, and each image's rows in order (empty unless every image has its rows or was `served`: None for
    those). `rows`: item index → its encoder rows (trace.media.item_rows, or an engine's record); `notes`: what could
    not be split, each a failed check; `served`: item index → how an engine's prefix cache served every placeholder of
    it, in words (this run neither encoded nor merged it)."""
    served = served or {}
    per_image, checks = [], [Check(note, False, kind=FindingKind.SHAPE_MISMATCH) for note in notes]
    for img in images:
        mine = rows.get(img.index)
        if mine is None and img.index in served:
            per_image.append(EncodeImage(image=img.index, cached=served[img.index]))
            continue
        if mine is None:
            if not notes:  # an item whose call was recorded without its rows (an engine request record)
                checks.append(Check(f"image {img.index}: encoder rows recorded", False, "none recorded", FindingKind.SHAPE_MISMATCH))
            continue
        fields, check = kept_rows(mine, img.index, f"image {img.index}", tensors)
        per_image.append(EncodeImage(image=img.index, **fields))
        checks.append(check)
    encode_rows = [rows.get(img.index) for img in images] if all(img.index in rows or img.index in served for img in images) else []
    return Stage(StageName.ENCODE, EncodeSummary(images=per_image), checks), encode_rows


def kept_rows(rows, item: int, label: str, tensors: dict) -> tuple[dict, Check]:
    """One item's encoder rows kept as `encode.<item>`: the summary fields every family's encode entry has (rows, dim,
    stats, fingerprint) and its NaN/Inf check, named by `label` ("image 0", "clip 1", "video 0")."""
    st = tensor_stats(rows)
    tensors[tensor_name(T.ENCODE, item=item)] = rows
    fields = {"rows": rows.shape[0], "dim": rows.shape[1], "stats": TensorStats(**st), "fingerprint": fingerprint(rows)}
    return fields, Check(f"{label}: no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf", FindingKind.NAN_INF)
