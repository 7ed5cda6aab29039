"""`placeholder-shift:N` inside vLLM (`QDEBUG_VLLM_INJECT`, see vllm_faults.py): each item's placeholder range starts N
tokens later in the worker than the prompt's placeholder tokens, as when the ranges were counted on another token list
than the one the engine runs (a token added in front after the processor placed them): the encoder rows then land N
positions past the placeholders (visual@ ≠ text@, the seeds' desync), over text the prompt put there.

The prompt's tokens are left as they are; what changes is the ranges the runner keeps for the request (its
`mm_features`, taken when the request arrives), so the merge and the model's own position function both follow the
shifted ranges. Nothing here says which request was touched: qdebug reads the prompt's tokens and the ranges."""

from __future__ import annotations

from dataclasses import replace
from typing import Any


def shifted(features: Any, by: int) -> list:
    """The features with each placeholder range `by` tokens later (new objects: the scheduler keeps its own)."""
    return [replace(f, mm_position=replace(f.mm_position, offset=int(f.mm_position.offset) + by)) for f in features or []]


def plant_placeholder_shift(runner: Any, by: int) -> None:
    """Wrap the runner's `_update_states` (vLLM 0.32's V1 runner: it builds each new request's state from the step's
    `scheduled_new_reqs`) so that every new request's ranges are shifted first."""
    update = runner._update_states

    def update_shifted(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        for new in getattr(scheduler_output, "scheduled_new_reqs", None) or []:
            new.mm_features = shifted(new.mm_features, by)
        return update(scheduler_output, *args, **kwargs)

    runner._update_states = update_shifted
