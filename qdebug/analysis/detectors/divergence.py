"""Divergence: a replayed run vs its isolated reference (first-token KL and top-k overlap, texts)."""

from __future__ import annotations

from qdebug.trace.tensor_names import TensorKind as T


def first_token_divergence(reference, replayed) -> tuple[float | None, float | None]:
    """KL(reference ‖ replayed) of the first generated token's distribution, and top-k overlap."""
    if reference is None or replayed is None or not reference.steps or not replayed.steps:
        return None, None
    a, b = reference.tensor_or_none(T.STEP_LOGITS, step=0), replayed.tensor_or_none(T.STEP_LOGITS, step=0)
    first_kl = kl(a, b) if a is not None and b is not None and a.shape == b.shape else None
    return first_kl, topk_overlap(reference.steps[0].topk.token_ids, replayed.steps[0].topk.token_ids)


def kl(logits_a, logits_b) -> float:
    """KL(softmax(a) ‖ softmax(b)) over the last dimension (summed over any leading ones), from raw logits; never below 0."""
    import torch

    la, lb = torch.log_softmax(logits_a.float(), -1), torch.log_softmax(logits_b.float(), -1)
    # KL is never negative; float rounding of two nearly equal distributions can make the sum a hair below 0.
    return max(0.0, float((la.exp() * (la - lb)).sum()))


def topk_overlap(ids_a, ids_b) -> float:
    """Fraction of the first list's top-k ids that the second list also has."""
    return len(set(ids_a) & set(ids_b)) / max(1, len(ids_a))


def observed_sources(observed: str | None, references: dict[str, str]) -> list[str]:
    """Every request whose reference text an observed output equals, in id order (several answer alike: text alone
    cannot tell them apart)."""
    if observed is None:
        return []
    return [rid for rid, text in references.items() if text is not None and text.strip() == observed.strip()]
