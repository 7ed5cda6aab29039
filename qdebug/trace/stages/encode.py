"""`encode`: the vision tower's merged rows, split per image."""

from __future__ import annotations

from qdebug.vocab import FindingKind, StageName

from ..schema import Check, ImageInfo, Stage
from ..stats import fingerprint, tensor_stats
from ..summaries import EncodeImage, EncodeSummary, TensorStats
from ..tensor_names import TensorKind as T, tensor_name


def encode_stage(rec, images: list[ImageInfo], tensors: dict) -> tuple[Stage, list]:
    """The stage, and each image's rows (empty when the rows do not split by the images' grids)."""
    import torch

    encode_rows = []
    if rec.vision_rows is not None:
        sizes = [img.tokens for img in images]
        encode_rows = list(torch.split(rec.vision_rows, sizes)) if sum(sizes) == rec.vision_rows.shape[0] else []
    per_image, checks = [], []
    for img, rows in zip(images, encode_rows):
        st = tensor_stats(rows)
        tensors[tensor_name(T.ENCODE, item=img.index)] = rows
        per_image.append(EncodeImage(image=img.index, rows=rows.shape[0], dim=rows.shape[1], stats=TensorStats(**st), fingerprint=fingerprint(rows)))
        checks.append(Check(f"image {img.index}: no NaN/Inf", st["nan"] == 0 and st["inf"] == 0, f"{st['nan']} NaN, {st['inf']} Inf", FindingKind.NAN_INF))
    if rec.vision_rows is not None and not encode_rows:
        checks.append(Check("encoder rows split per image", False, f"{rec.vision_rows.shape[0]} rows for grids {[i.grid_thw for i in images]}"))
    return Stage(StageName.ENCODE, EncodeSummary(images=per_image), checks), encode_rows
