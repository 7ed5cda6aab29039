"""Measure the demo model: exact captions and attention-peak-in-quadrant rate on fresh scenes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .scenes import PROMPTS, cell_in_quadrant, make_scene

EVAL_SEED = 987654  # never used for training


@dataclass
class EvalResult:
    """Quality figures of one evaluation run."""

    scenes: int
    exact: int
    peak_in_quadrant: int
    misses: list[tuple[str, str]] = field(default_factory=list)  # (expected, got) for wrong captions

    @property
    def exact_rate(self) -> float:
        """Fraction of exact captions."""
        return self.exact / max(1, self.scenes)

    @property
    def peak_rate(self) -> float:
        """Fraction of scenes whose attention peak is in the shape's quadrant."""
        return self.peak_in_quadrant / max(1, self.scenes)


def evaluate(loaded, n: int = 200, seed: int = EVAL_SEED, on_scene: Callable[[int], None] | None = None) -> EvalResult:
    """Trace `n` fresh scenes with greedy decoding; count exact captions and in-quadrant attention peaks."""
    from qdebug.analysis.attention import attention_grid, peak_of
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request

    rng = random.Random(seed)
    result = EvalResult(scenes=n, exact=0, peak_in_quadrant=0)
    for i in range(n):
        scene = make_scene(rng)
        request = build_request(rng.choice(PROMPTS), [], images=[scene.image], max_new_tokens=12)
        trace = trace_request(loaded, request)
        if trace.generated_text.strip() == scene.caption:
            result.exact += 1
        else:
            result.misses.append((scene.caption, trace.generated_text))
        grid = attention_grid(trace, 0)
        if grid is not None:
            peak = peak_of(grid, 0)
            result.peak_in_quadrant += cell_in_quadrant(peak.row, peak.col, peak.rows, peak.cols, scene.quadrant)
        if on_scene is not None:
            on_scene(i)
    return result
