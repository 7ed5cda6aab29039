"""The report of `qdebug estimate`: parameters, weights, trace size and what tracing adds, one line each."""

from __future__ import annotations


def estimate_lines(est) -> list[str]:
    """The lines `qdebug estimate` prints for an Estimate."""
    from qdebug.trace.estimate import gib

    return [
        f"{est.architecture} ({est.model_type}): {est.parameters:,} parameters",
        f"weights: {gib(est.weights_bytes)} in {est.dtype}",
        f"trace ({est.image_tokens} image tokens, {est.max_new_tokens} new tokens, attention in {est.layers_captured}/{est.layers} layers): "
        f"{gib(est.trace_bytes)} ({gib(est.trace_bytes // max(1, est.layers))} per layer)",
        f"tracing adds on {est.device}: {gib(est.extra_bytes)}; total about {gib(est.total_bytes)}",
    ]
