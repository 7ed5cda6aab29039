"""Decode untrusted image bytes safely: refuse decompression bombs, scale high-bit-depth pixels to 8 bits, and turn
photos upright and flatten transparency exactly as transformers' own image loading and processors do."""

from __future__ import annotations

import re
import warnings

from qdebug.errors import ImageError

ORIENTATION_TAG = 0x0112
# What Pillow's exif_transpose does for each EXIF Orientation value.
ORIENTATIONS = {1: "upright", 2: "mirrored left-right", 3: "turned 180°", 4: "flipped top-bottom", 5: "transposed",
                6: "turned 90° clockwise", 7: "transversed", 8: "turned 90° counter-clockwise"}
NOTES_KEY = "qdebug_notes"  # a decoded image's `info` key listing what decode did to it

# Qwen-VL processors refuse images whose long side exceeds 200 × the short side (smart_resize).
MAX_ASPECT_RATIO = 200


def max_pixels() -> int | None:
    """The largest image (width × height) decoded: Pillow's MAX_IMAGE_PIXELS, read at call time."""
    from PIL import Image

    return Image.MAX_IMAGE_PIXELS


def open_checked(source, label: str):
    """Image.open with Pillow's bomb check as an error at MAX_IMAGE_PIXELS (not only at twice that)."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            return Image.open(source)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise too_large(label, exc) from None


def too_large(label: str, exc: Exception) -> ImageError:
    """One-line error for an image over the pixel limit (the size read from its header, never decoded)."""
    found = re.search(r"\((\d+) pixels\)", str(exc))
    pixels = f"{int(found.group(1)):,} pixels" if found else "too many pixels"
    return ImageError(f"image too large: {label} has {pixels} (expected at most {max_pixels():,}; a decompression bomb?)")


def check_size(im, label: str) -> None:
    """Refuse an opened image before decoding when its declared size is over the limit or degenerate."""
    w, h = im.size
    limit = max_pixels()
    if limit is not None and w * h > limit:
        raise ImageError(f"image too large: {label} is {w}×{h} = {w * h:,} pixels (expected at most {limit:,}; a decompression bomb?)")
    if w < 1 or h < 1:
        raise ImageError(f"empty image: {label} is {w}×{h} (expected at least 1×1 pixels)")


def check_aspect(im, label: str) -> None:
    """Refuse an aspect ratio the Qwen-VL processors cannot take (before any model loads)."""
    w, h = im.size
    if max(w, h) > MAX_ASPECT_RATIO * min(w, h):
        ratio = max(w, h) / min(w, h)
        raise ImageError(
            f"image {label} is {w}×{h} (aspect ratio {ratio:.0f}:1); expected at most {MAX_ASPECT_RATIO}:1, "
            "the most the Qwen-VL image processor accepts"
        )


def to_rgb(im):
    """RGB of a decoded image; 16-bit and 32-bit grey or float images are scaled to 0..255, not clipped."""
    import numpy as np
    from PIL import Image

    mode = im.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        arr = np.asarray(im, dtype=np.float64)
        if mode.startswith("I;16"):
            scale = 65535.0
        elif mode == "F":
            scale = 1.0 if arr.size and arr.min() >= 0.0 and arr.max() <= 1.0 else float(max(arr.max(initial=0.0), 1.0))
        else:  # 32-bit integer grey: Pillow opens 16-bit PNG/TIFF as "I" too, so 0..65535 unless larger values occur
            top = arr.max(initial=0.0)
            scale = 255.0 if top <= 255 else 65535.0 if top <= 65535 else float(top)
        arr = np.nan_to_num(arr, nan=0.0, posinf=scale, neginf=0.0)
        grey = np.clip(np.rint(arr / scale * 255.0), 0, 255).astype(np.uint8)
        return Image.fromarray(grey).convert("RGB")  # uint8 2-D → mode L
    if has_alpha(im):  # as transformers' convert_to_rgb (the processors' do_convert_rgb): composite onto white
        rgba = im.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    return im.convert("RGB")


def has_alpha(im) -> bool:
    """Whether an image has transparency (an alpha band or a transparent colour), as transformers tests for it."""
    return "A" in im.getbands() or im.info.get("transparency") is not None


def notes(im) -> list[str]:
    """What `decode` did to an image beyond decoding it (EXIF orientation, transparency), for the preprocess stage."""
    return list(getattr(im, "info", {}).get(NOTES_KEY, ()))


def decode(source, label: str):
    """Open, check (pixel limit, aspect ratio) from the header, fully decode, apply the EXIF orientation, convert to RGB
    (transparency onto white); what was done is in `notes(image)`; ImageError on a refusal."""
    from PIL import Image, ImageOps

    with open_checked(source, label) as im:
        check_size(im, label)
        check_aspect(im, label)
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                im.load()
            except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
                raise too_large(label, exc) from None
        done = []
        orientation = im.getexif().get(ORIENTATION_TAG, 1)
        upright = im
        if orientation in ORIENTATIONS and orientation != 1:  # transformers' load_image turns photos upright first
            upright = ImageOps.exif_transpose(im)
            done.append(f"EXIF orientation {orientation} applied ({ORIENTATIONS[orientation]}), as transformers' load_image does")
        if has_alpha(upright):
            done.append(f"transparency ({upright.mode}) composited onto white, as the processor's convert_to_rgb does")
        rgb = to_rgb(upright)
        rgb.info[NOTES_KEY] = done
        return rgb


def flat_colour(im) -> tuple | None:
    """The single colour of an image that is one flat colour everywhere, else None."""
    extrema = im.getextrema()
    if im.getbands() == ("L",) or not isinstance(extrema[0], tuple):
        extrema = (extrema,)
    if all(lo == hi for lo, hi in extrema):
        return tuple(lo for lo, _ in extrema)
    return None
