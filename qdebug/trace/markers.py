"""The one `<marker>` prompt parser: where each image, clip and video stands in the user message."""

from __future__ import annotations

import re

# Literal markers a user may put in the prompt to place an item; one per item of that kind.
IMAGE_MARKER = "<image>"
AUDIO_MARKER = "<audio>"
VIDEO_MARKER = "<video>"

_KIND_OF = {IMAGE_MARKER: "image", AUDIO_MARKER: "audio", VIDEO_MARKER: "video"}
_NOUN = {"image": "image", "audio": "clip", "video": "video"}


def media_parts(prompt: str, counts: dict[str, int]) -> list[tuple[str, object]]:
    """Message parts: each kind at its markers (one per item), or, for a kind the prompt does not mark, its items
    first (images, then clips, then videos); PlaceholderError when a kind's markers and items disagree. A marker of
    a kind `counts` does not name stays text."""
    from qdebug.errors import PlaceholderError

    pieces = re.split("(" + "|".join(map(re.escape, _KIND_OF)) + ")", prompt)
    marked = {kind: sum(1 for p in pieces if _KIND_OF.get(p) == kind) for kind in counts}
    for kind, n in marked.items():
        if n and n != counts[kind]:
            noun = _NOUN[kind]
            raise PlaceholderError(f"prompt has {n} <{kind}> placeholder(s) but {counts[kind]} {noun}(s) were given "
                                   f"(expected one placeholder per {noun}, or none to put the {noun}s first)")
    parts: list[tuple[str, object]] = [(kind, i) for kind in ("image", "audio", "video") if not marked.get(kind) for i in range(counts.get(kind, 0))]
    seen = dict.fromkeys(counts, 0)
    text = ""
    for piece in pieces:
        found = _KIND_OF.get(piece)
        if found is None or found not in seen:
            text += piece
            continue
        if text:
            parts.append(("text", text))
            text = ""
        parts.append((found, seen[found]))
        seen[found] += 1
    if text:
        parts.append(("text", text))
    return parts
