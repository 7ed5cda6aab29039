"""StepHooks: the one wrap of a vLLM runner's `execute_model`; the plugin's parts subscribe to a step instead of each
replacing the method.

Per step, in the order DECLARED (so which part sees what does not depend on the order the parts attached in):
the plugin's `before(scheduler_output)` hooks (tracer, then watch), vLLM's own step timed as vLLM's (a step delay's
`before` inside it: a planted slowness counts as the engine's), then the `after(scheduler_output, output)` hooks in the
reverse order (watch, then tracer; `output` is None when vLLM's step raised, and every `after` still runs). The
worker's PluginClock, once given, times the whole call (its outer share) and vLLM's part (its inner share), and
`sample_tokens`, the step's second call, as vLLM's. A hook that raises costs only itself: said once per part, the step
and the other parts go on (each part keeps its own guards inside, as before).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .plugin_clock import PluginClock

log = logging.getLogger("vllm.qdebug")


class StepPart(Protocol):
    """What a subscriber offers: a hook before the step and one after it."""

    def before(self, scheduler_output: Any) -> None: ...

    def after(self, scheduler_output: Any, output: Any) -> None: ...


@dataclass(frozen=True)
class Slot:
    """A declared place in the step: its name, and whether its time is vLLM's (inside the clock's inner timer)."""

    name: str
    engine_time: bool = False


TRACER, WATCH, DELAY = Slot("tracer"), Slot("watch"), Slot("delay", engine_time=True)
DECLARED: tuple[Slot, ...] = (TRACER, WATCH, DELAY)  # the tracer first: the cache witness is stepped before the watch reads it


class StepHooks:
    """The runner's `execute_model`, replaced once; subscribers called in DECLARED order."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.execute = runner.execute_model  # vLLM's own (an AttributeError here: nothing is replaced)
        self.parts: dict[Slot, StepPart] = {}
        self.plugin: list[tuple[Slot, StepPart]] = []  # timed as the plugin's, in order
        self.engine: list[tuple[Slot, StepPart]] = []  # timed as vLLM's, in order
        self.clock: PluginClock | None = None
        self.failed: set[str] = set()  # parts whose error was said
        runner.execute_model = self.execute_model

    def subscribe(self, slot: Slot, part: StepPart) -> None:
        """Put `part` in its declared place (a second part in the same place replaces the first)."""
        if slot not in DECLARED:
            raise ValueError(f"{slot.name}: not a declared step slot; expected one of {', '.join(s.name for s in DECLARED)}")
        self.parts[slot] = part
        ordered = [(s, self.parts[s]) for s in DECLARED if s in self.parts]
        self.plugin = [(s, p) for s, p in ordered if not s.engine_time]
        self.engine = [(s, p) for s, p in ordered if s.engine_time]

    def use_clock(self, clock: PluginClock) -> None:
        """Time every step with `clock` from now on, and vLLM's `sample_tokens` as vLLM's."""
        first, self.clock = self.clock is None, clock
        sample = getattr(self.runner, "sample_tokens", None)
        if first and callable(sample):  # vLLM's step goes on there (sampling, after execute_model): none of it the plugin's
            self.runner.sample_tokens = lambda *args, **kwargs: clock.sampling(sample, *args, **kwargs)

    # the step ------------------------------------------------------------------------------------------
    def execute_model(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        if self.clock is None:
            return self._step(scheduler_output, args, kwargs)
        return self.clock.step(self._step, scheduler_output, args, kwargs)

    def _step(self, scheduler_output: Any, args: tuple, kwargs: dict) -> Any:
        for slot, part in self.plugin:
            self._call(slot, part.before, scheduler_output)
        output = None
        try:
            if self.clock is None:
                output = self._vllm(scheduler_output, args, kwargs)
            else:
                output = self.clock.engine(self._vllm, scheduler_output, args, kwargs)
            return output
        finally:
            for slot, part in reversed(self.plugin):
                self._call(slot, part.after, scheduler_output, output)

    def _vllm(self, scheduler_output: Any, args: tuple, kwargs: dict) -> Any:
        for slot, part in self.engine:
            self._call(slot, part.before, scheduler_output)
        output = None
        try:
            output = self.execute(scheduler_output, *args, **kwargs)
            return output
        finally:
            for slot, part in reversed(self.engine):
                self._call(slot, part.after, scheduler_output, output)

    def _call(self, slot: Slot, hook: Any, *args: Any) -> None:
        """Run one part's hook; an exception is said once for that part and never reaches vLLM."""
        try:
            hook(*args)
        except Exception as exc:  # the plugin never fails a step
            if slot.name not in self.failed:
                self.failed.add(slot.name)
                log.error("qdebug: the %s's step hook failed (%s: %s); the step runs on, later failures of it are not said",
                          slot.name, type(exc).__name__, exc)


def hooks_of(runner: Any) -> StepHooks:
    """The runner's StepHooks, made (replacing `execute_model`) the first time a part asks."""
    hooks = getattr(runner, "_qdebug_steps", None)
    if hooks is None:
        hooks = StepHooks(runner)
        runner._qdebug_steps = hooks
    return hooks
