"""The plugin's clock in vLLM's worker: the plugin's time around a step (its wrappers) and inside it (`with clock`
blocks in hooks, nested ones once) is its own; vLLM's own time, a planted delay included, is not. The clock times
the runner's one wrap of execute_model (engine/step_hooks.py). Time is a fake perf_counter the test advances, so every
figure is exact."""

from __future__ import annotations

import pytest

from qdebug.engine import plugin_clock
from qdebug.engine.plugin_clock import NoClock, PluginClock, clock_of, share
from qdebug.engine.step_hooks import TRACER, WATCH, hooks_of


class FakeTime:
    """perf_counter that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


class Runner:
    """A runner whose execute_model spends vLLM's time and runs the model hooks the plugin attached."""

    def __init__(self, now: FakeTime) -> None:
        self.now, self.hooks = now, []

    def execute_model(self, scheduler_output):
        self.now.spend(0.010)  # vLLM before the model
        for hook in self.hooks:
            hook()
        self.now.spend(0.020)  # the rest of vLLM's step
        return scheduler_output

    def sample_tokens(self, grammar_output):
        self.now.spend(0.007)  # vLLM's sampling, the step's second call
        return grammar_output


@pytest.fixture()
def now(monkeypatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(plugin_clock, "perf_counter", fake)
    return fake


class Bookkeeping:
    """A part of the plugin's on the runner's steps: `before_s` before vLLM's step, `after_s` after it."""

    def __init__(self, now: FakeTime, before_s: float, after_s: float) -> None:
        self.now, self.before_s, self.after_s = now, before_s, after_s

    def before(self, scheduler_output) -> None:
        self.now.spend(self.before_s)

    def after(self, scheduler_output, output) -> None:
        self.now.spend(self.after_s)


def test_the_plugins_time_around_and_inside_a_step_is_its_own_and_vllms_is_not(now):
    runner = Runner(now)
    clock = PluginClock()
    runner._qdebug_clock = clock
    vllm_execute = runner.execute_model
    runner.execute_model = lambda out: (now.spend(0.005), vllm_execute(out))[1]  # a planted fault's slowness: vLLM's time
    hooks = hooks_of(runner)
    hooks.use_clock(clock)
    hooks.subscribe(WATCH, Bookkeeping(now, 0.001, 0.002))  # the plugin's part: 1 ms before the step, 2 ms after

    def check():  # a hook inside vLLM's step: 3 ms, of which a nested block of 1 ms counts once
        with clock_of(runner):
            now.spend(0.002)
            with clock_of(runner):
                now.spend(0.001)

    runner.hooks.append(check)
    assert runner.execute_model("step 1") == "step 1" and runner.sample_tokens("grammar") == "grammar"
    runner.execute_model("step 2")
    runner.sample_tokens(None)
    assert clock.steps == 2
    assert clock.step_seconds == pytest.approx(2 * (0.005 + 0.030 + 0.007 + 0.003 + 0.003))
    assert clock.own_seconds == pytest.approx(2 * (0.003 + 0.003))
    assert share(clock.own_seconds, clock.step_seconds) == pytest.approx(0.006 / 0.042)
    assert clock.snapshot() == {"steps": 2, "step_seconds": clock.step_seconds, "own_seconds": clock.own_seconds, "writer_seconds": 0.0}


def test_a_step_that_raises_is_still_timed(now):
    runner = Runner(now)
    clock = PluginClock()
    hooks = hooks_of(runner)
    hooks.use_clock(clock)
    hooks.subscribe(TRACER, Bookkeeping(now, 0.004, 0.0))
    runner.hooks.append(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        runner.execute_model("step")
    assert clock.steps == 1 and clock.own_seconds == pytest.approx(0.004) and clock.step_seconds == pytest.approx(0.014)


def test_without_a_clock_the_blocks_keep_nothing():
    class Bare:
        pass

    clock = clock_of(Bare())
    assert isinstance(clock, NoClock)
    with clock:
        pass
    assert share(0.0, 0.0) == 0.0


def test_a_workers_clock_is_published_in_the_trace_folder_and_summed(tmp_path, monkeypatch):
    import json
    import time

    monkeypatch.setattr(plugin_clock, "WRITE_SECONDS", 0.05)
    clock = PluginClock()
    clock.steps, clock.step_seconds, clock.own_seconds, clock.writer_seconds = 5, 0.5, 0.01, 0.2
    plugin_clock.publish(clock, str(tmp_path))
    (tmp_path / "clock-1.json").write_text(json.dumps({"steps": 3, "step_seconds": 0.25, "own_seconds": 0.02}))  # another worker
    (tmp_path / "clock-2.json").write_text("{half")  # a torn file from elsewhere: skipped
    deadline = time.monotonic() + 10
    while plugin_clock.read_clocks(str(tmp_path))["steps"] != 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert plugin_clock.read_clocks(str(tmp_path)) == pytest.approx({"steps": 8, "step_seconds": 0.75, "own_seconds": 0.03, "writer_seconds": 0.2})
    assert not list(tmp_path.glob("*.tmp"))
    assert plugin_clock.read_clocks(str(tmp_path / "none")) == dict.fromkeys(["steps", "step_seconds", "own_seconds", "writer_seconds"], 0.0)


def test_the_cache_witness_observed_before_the_step_is_the_plugins_time_once(now):
    """The tracer's wrapper takes in each step's cache reads (CacheWitness.observe) before vLLM's step runs: the clock's
    outer timer already counts that as the plugin's. Before, it was also counted in a `with clock` block: twice."""
    from types import SimpleNamespace

    from qdebug.engine.vllm_tracer import EngineTracer

    runner = Runner(now)
    clock = runner._qdebug_clock = PluginClock()
    hooks_of(runner).use_clock(clock)
    witness = SimpleNamespace(observe=lambda out: now.spend(0.004))  # 4 ms taking in the step's reads
    tracer = EngineTracer(runner, None, trace_all=False, witness=witness)
    tracer.handles = []  # install() would set it (with the model's layers: none here)
    hooks_of(runner).subscribe(TRACER, tracer)
    runner.execute_model(SimpleNamespace(scheduled_new_reqs=[], finished_req_ids=set()))
    assert clock.steps == 1 and clock.own_seconds == pytest.approx(0.004)
    assert clock.step_seconds == pytest.approx(0.034)  # vLLM's 30 ms and the plugin's 4
