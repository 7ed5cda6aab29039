"""The runner's one wrap of `execute_model` (engine/step_hooks.py): however many of the plugin's parts attach, vLLM's
method is replaced once; the parts run in their declared order whatever order they attached in; a part that raises
costs only itself; the clock's inner share is vLLM's step (a step delay included), its outer share the whole call."""

from __future__ import annotations

import logging

import pytest

from tests.engine_fakes import FakeRunner, image, request


class CountingRunner(FakeRunner):
    """The fake runner, counting how often anything replaces its `execute_model`."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "execute_model":
            object.__setattr__(self, "replaced", getattr(self, "replaced", 0) + 1)
        object.__setattr__(self, name, value)


def test_every_part_of_the_plugin_attached_replaces_execute_model_once_and_a_step_runs_through_all(tmp_path):
    """Before, the step delay, the clock (twice), the watch and the tracer each replaced execute_model: 4 wraps here."""
    from qdebug.engine import vllm_plugin
    from qdebug.engine.step_delay import slow_steps
    from qdebug.engine.vllm_tracer import EngineTracer
    from qdebug.engine.watch_engine import Watcher
    from qdebug.engine.watch_settings import WatchSettings

    runner = CountingRunner()
    slow_steps(runner, 0.001)  # in load_model's order: the delay, the clock, the watch, the tracer
    clock = vllm_plugin._start_clock(runner)
    watcher = Watcher(runner, WatchSettings(sample=0.0, folder=str(tmp_path), log_bytes=1 << 20, raising=frozenset(), run="r"))
    watcher.install()
    tracer = EngineTracer(runner, None, trace_all=False)
    tracer.install()
    assert runner.replaced == 1
    runner.add(request("a", [image("img-a")]))
    logits = runner.step({"a": None})
    assert logits.shape[0] == 1 and runner.requests["a"].num_computed_tokens == len(runner.requests["a"].prompt_token_ids)
    assert clock is not None and clock.steps == 1 and clock.step_seconds >= 0.001


class Part:
    """A subscriber that notes its hooks in `events` (and raises where told)."""

    def __init__(self, name: str, events: list, raises: str = "") -> None:
        self.name, self.events, self.raises = name, events, raises

    def before(self, scheduler_output) -> None:
        self.events.append(f"{self.name}.before")
        if "before" in self.raises:
            raise RuntimeError(f"{self.name} broke before")

    def after(self, scheduler_output, output) -> None:
        self.events.append(f"{self.name}.after:{output}")
        if "after" in self.raises:
            raise RuntimeError(f"{self.name} broke after")


class Runner:
    """vLLM's runner as the step hooks see it: execute_model answers its input; sample_tokens likewise."""

    def __init__(self, events: list, fail: bool = False) -> None:
        self.events, self.fail = events, fail

    def execute_model(self, scheduler_output, intermediate=None):
        self.events.append(f"vllm:{intermediate}")
        if self.fail:
            raise ValueError("vLLM's own step failed")
        return scheduler_output

    def sample_tokens(self, grammar):
        return grammar


def test_parts_run_in_declared_order_whatever_order_they_attached_in():
    from qdebug.engine.step_hooks import DELAY, TRACER, WATCH, hooks_of

    events: list = []
    runner = Runner(events)
    for slot in (DELAY, WATCH, TRACER):
        hooks_of(runner).subscribe(slot, Part(slot.name, events))
    assert runner.execute_model("out", intermediate="x") == "out"
    assert events == ["tracer.before", "watch.before", "delay.before", "vllm:x", "delay.after:out", "watch.after:out", "tracer.after:out"]


def test_a_part_that_raises_costs_only_itself_and_is_said_once(caplog):
    from qdebug.engine.step_hooks import TRACER, WATCH, hooks_of

    events: list = []
    runner = Runner(events)
    hooks = hooks_of(runner)
    hooks.subscribe(TRACER, Part("tracer", events, raises="before after"))
    hooks.subscribe(WATCH, Part("watch", events))
    with caplog.at_level(logging.ERROR, logger="vllm.qdebug"):
        assert runner.execute_model("step 1") == "step 1"
        assert runner.execute_model("step 2") == "step 2"
    assert events[:5] == ["tracer.before", "watch.before", "vllm:None", "watch.after:step 1", "tracer.after:step 1"]
    assert len(events) == 10
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "tracer" in said[0] and "broke before" in said[0], said


def test_when_vllms_step_raises_every_after_runs_and_the_error_reaches_the_engine():
    from qdebug.engine.step_hooks import DELAY, WATCH, hooks_of

    events: list = []
    runner = Runner(events, fail=True)
    hooks_of(runner).subscribe(WATCH, Part("watch", events))
    hooks_of(runner).subscribe(DELAY, Part("delay", events))
    with pytest.raises(ValueError, match="own step failed"):
        runner.execute_model("step")
    assert events == ["watch.before", "delay.before", "vllm:None", "delay.after:None", "watch.after:None"]


def test_only_declared_slots_take_parts():
    from qdebug.engine.step_hooks import Slot, hooks_of

    with pytest.raises(ValueError, match="not a declared step slot"):
        hooks_of(Runner([])).subscribe(Slot("mine"), Part("mine", []))


def test_the_clocks_inner_share_is_vllms_step_with_the_delay_and_the_outer_the_whole_call(monkeypatch):
    from qdebug.engine import plugin_clock
    from qdebug.engine.plugin_clock import PluginClock
    from qdebug.engine.step_hooks import DELAY, TRACER, hooks_of

    now = [0.0]
    monkeypatch.setattr(plugin_clock, "perf_counter", lambda: now[0])

    class Spending(Part):
        def __init__(self, name: str, before_s: float, after_s: float) -> None:
            super().__init__(name, [])
            self.before_s, self.after_s = before_s, after_s

        def before(self, scheduler_output) -> None:
            now[0] += self.before_s

        def after(self, scheduler_output, output) -> None:
            now[0] += self.after_s

    class Slow(Runner):
        def execute_model(self, scheduler_output, intermediate=None):
            now[0] += 0.030
            return scheduler_output

        def sample_tokens(self, grammar):
            now[0] += 0.007
            return grammar

    runner = Slow([])
    clock = PluginClock()
    hooks = hooks_of(runner)
    hooks.use_clock(clock)
    hooks.use_clock(clock)  # sample_tokens is timed once however often
    hooks.subscribe(TRACER, Spending("tracer", 0.001, 0.002))  # the plugin's: 3 ms
    hooks.subscribe(DELAY, Spending("delay", 0.005, 0.0))  # vLLM's, as a planted slowness is
    assert runner.execute_model("s") == "s" and runner.sample_tokens("g") == "g"
    assert clock.steps == 1
    assert clock.own_seconds == pytest.approx(0.003)
    assert clock.step_seconds == pytest.approx(0.003 + 0.005 + 0.030 + 0.007)
