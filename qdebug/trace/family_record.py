"""Family-specific recorders that run beside the main Recorder: linear attention (Qwen3.5), deepstack (Qwen3-VL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .deepstack_record import deepstack_recorder
from .linear_record import linear_recording


@contextmanager
def family_recording(loaded) -> Iterator[tuple]:
    """The model's family recorders (FamilySinks: give them to this thread's Recorder as `family`), for the duration.

    None installs a hook of its own: each hears only its thread's Recorder (and, for linear attention, this
    thread's kernel taps), so concurrent traces on one model keep their evidence apart.
    """
    with linear_recording(loaded) as linear:
        yield tuple(r for r in (linear, deepstack_recorder(loaded)) if r is not None)
