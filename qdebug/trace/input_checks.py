"""Findings about what reaches the processor: images of one flat colour, prompts longer than the model's context."""

from __future__ import annotations

import hashlib

from qdebug.findings import Finding
from qdebug.vocab import FindingKind, Severity, StageName

from .image_input import flat_colour


def image_digest(image) -> str:
    """sha256 of an image's decoded pixels (mode, size and bytes): the same picture gives the same digest."""
    h = hashlib.sha256()
    h.update(f"{image.mode}:{image.size[0]}x{image.size[1]}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def context_limit(config) -> int | None:
    """The decoder's context length (max_position_embeddings of the text config), when the config says."""
    text = getattr(config, "text_config", None) or config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def input_findings(request, prompt_tokens: int, limit: int | None) -> list[Finding]:
    """Warnings about the inputs themselves, observed on the decoded images and the tokenised prompt."""
    found: list[Finding] = []
    for i, image in enumerate(request.images):
        colour = flat_colour(image)
        if colour is not None:
            where = request.image_paths[i] if i < len(request.image_paths) else f"<image {i}>"
            found.append(Finding(
                kind=FindingKind.FLAT_IMAGE, severity=Severity.WARNING, stage=StageName.PREPROCESS,
                message=f"flat image: image {i} ({where}) reaches the processor as one colour {colour} in all "
                        f"{image.size[0]}×{image.size[1]} pixels; the model sees no content (check the file's bit depth)",
            ))
    if limit is not None and prompt_tokens + request.max_new_tokens > limit:
        found.append(Finding(
            kind=FindingKind.PROMPT_TOO_LONG, severity=Severity.WARNING, stage=StageName.PREPROCESS,
            message=f"prompt too long: {prompt_tokens} prompt tokens + {request.max_new_tokens} to generate exceed "
                    f"the model's context of {limit} tokens (max_position_embeddings); positions past {limit} are extrapolated",
        ))
    return found
