"""PluginClock: the plugin's own wall time inside vLLM's worker, against the steps it runs in.

vLLM's engine calls `runner.execute_model`, then `runner.sample_tokens`, once a step. The runner's one wrap of
execute_model (engine/step_hooks.py) has the clock time it twice: inside, around vLLM's own call (a planted fault or
step delay counts as vLLM's), and outside, around every part's hooks (the tracer's, the batch log's and the watch's
bookkeeping before and after a step); their difference is the plugin's time around a step. Its time inside a step (the watch's checks in the model's
embed/logits/encoder calls, the batch log's encoder wrappers, the tracer's layer hooks) is added by the code that
spends it, `with clock:` (nested blocks count once). sample_tokens is vLLM's alone. The share `own / (step - own)` is
how much longer the worker's steps run because of the plugin: an upper bound on its cost in requests/s where that
loop sets the rate (the engine's scheduling and output work, outside the steps, are not in the denominator), measured
in one run, without a second server to compare with (on shared cores two servers' rates differ by more than that).
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any


class PluginClock:
    """Steps, their wall time (vLLM's and the plugin's) and the plugin's own part; one per worker, main thread only."""

    def __init__(self) -> None:
        self.steps = 0
        self.step_seconds = 0.0  # execute_model and sample_tokens as vLLM's engine sees them, the plugin's wrappers included
        self.own_seconds = 0.0  # the plugin's part of that
        self.writer_seconds = 0.0  # CPU seconds of the trace writer's thread (assembling and saving traces, off the steps)
        self._depth = 0
        self._entered = 0.0
        self._inner = 0.0  # vLLM's own execute_model, so far

    def __enter__(self) -> "PluginClock":
        if not self._depth:
            self._entered = perf_counter()
        self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if not self._depth:
            self.own_seconds += perf_counter() - self._entered

    def engine(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call `fn` (vLLM's own execute_model) timed as vLLM's: the inner share (StepHooks calls it)."""
        depth, self._depth = self._depth, 0  # vLLM's own work: a hook inside it counts only its own block
        start = perf_counter()
        try:
            return fn(*args)
        finally:
            self._inner += perf_counter() - start
            self._depth = depth

    def step(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call `fn` (execute_model as the engine calls it) timed as a step: what is not vLLM's in it is the plugin's."""
        start, inner = perf_counter(), self._inner
        try:
            return fn(*args)
        finally:
            total = perf_counter() - start
            self.steps += 1
            self.step_seconds += total
            self.own_seconds += total - (self._inner - inner)

    def sampling(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call `fn` (vLLM's sample_tokens, the step's second call) timed as vLLM's step time, none of it the plugin's."""
        start = perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.step_seconds += perf_counter() - start

    def snapshot(self) -> dict[str, float]:
        """steps, step_seconds, own_seconds, writer_seconds (JSON-ready)."""
        return {"steps": self.steps, "step_seconds": self.step_seconds, "own_seconds": self.own_seconds,
                "writer_seconds": self.writer_seconds}


class NoClock:
    """A clock that keeps nothing: where the plugin's wrappers are used without a worker's clock (tests, tools)."""

    def __enter__(self) -> "NoClock":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def clock_of(runner) -> "PluginClock | NoClock":
    """The runner's clock, or one that keeps nothing."""
    return getattr(runner, "_qdebug_clock", None) or NoClock()


def share(own: float, step: float) -> float:
    """The plugin's cost as a fraction of vLLM's own step time (0.03: the step loop runs 3% longer)."""
    vllm = step - own
    return own / vllm if vllm > 0 else 0.0


CLOCK_FILE = "clock-{pid}.json"  # in the trace folder: one worker's clock, rewritten while it moves
WRITE_SECONDS = 1.0


def publish(clock, folder: str, name: str = CLOCK_FILE) -> None:
    """Rewrite `folder/<name with this pid>` (default `clock-<pid>.json`) with `clock.snapshot()` at most once a second
    while it moves (a daemon thread: write beside, rename into place, so a reader never sees half a file); an error
    stops it, said once."""
    import json
    import logging
    import os
    import threading
    import time

    path = os.path.join(folder, name.format(pid=os.getpid()))

    def loop() -> None:
        written: dict | None = None
        while True:
            time.sleep(WRITE_SECONDS)
            snapshot = clock.snapshot()
            if snapshot == written:
                continue
            written = snapshot
            try:
                with open(f"{path}.tmp", "w", encoding="utf-8") as fh:
                    json.dump(snapshot, fh)
                os.replace(f"{path}.tmp", path)
            except OSError as exc:
                logging.getLogger("vllm.qdebug").warning("qdebug: the plugin's clock is no longer written to %s (%s)", path, exc)
                return

    threading.Thread(target=loop, name="qdebug-clock", daemon=True).start()


def read_clocks(folder: str, name: str = CLOCK_FILE, keys: tuple[str, ...] = ("steps", "step_seconds", "own_seconds", "writer_seconds")) -> dict[str, float]:
    """The summed clocks of the processes that wrote `name` files into `folder` (by default the workers'
    PluginClock.snapshot keys; zeros for none)."""
    import glob
    import json
    import os

    total = dict.fromkeys(keys, 0.0)
    for path in glob.glob(os.path.join(glob.escape(folder), name.format(pid="*"))):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            for key in total:
                total[key] += float(doc.get(key, 0) or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return total
