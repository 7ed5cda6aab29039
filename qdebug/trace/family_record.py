"""Family-specific recorders that run beside the main Recorder: linear attention (Qwen3.5), deepstack (Qwen3-VL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from .deepstack_record import deepstack_recording
from .linear_record import linear_recording


@contextmanager
def family_recording(loaded) -> Iterator[list]:
    """The active family recorders (each has `attach(trace, loaded, prepared)`), hooks removed after."""
    with ExitStack() as stack:
        recorders = [stack.enter_context(cm(loaded)) for cm in (linear_recording, deepstack_recording)]
        yield [r for r in recorders if r is not None]
