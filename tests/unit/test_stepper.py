"""The stepper really pauses the forward pass at breakpoints, and cancelling leaves no thread behind."""

import threading

from qdebug.trace.request import build_request
from qdebug.trace.stepper import Stepper
from tests.conftest import scene


def _events():
    seen, cond = [], threading.Condition()

    def on_event(kind, stage):
        with cond:
            seen.append((kind, stage))
            cond.notify_all()

    def wait_for(pred, timeout=60):
        with cond:
            assert cond.wait_for(lambda: pred(seen), timeout), seen

    return on_event, wait_for, seen


def test_pauses_at_breakpoint_and_steps(demo):
    on_event, wait_for, seen = _events()
    req = build_request("Describe the image.", [], images=[scene(1).image], max_new_tokens=4)
    stepper = Stepper(demo, req, breakpoints={"layer.1"}, on_event=on_event)
    stepper.start()
    wait_for(lambda s: ("paused", "layer.1") in s)
    assert stepper.paused_at == "layer.1" and stepper.running
    assert "layer.2" not in stepper.reached  # the forward pass is blocked inside layer 1's hook
    stepper.next()
    wait_for(lambda s: ("paused", "layer.2") in s)
    stepper.continue_()
    wait_for(lambda s: ("done", None) in s)
    stepper.join(10)
    assert not stepper.running and stepper.trace is not None
    assert stepper.trace.stage_names[:3] == ["preprocess", "encode", "sync"]


def test_cancel_at_breakpoint_leaves_no_thread_and_no_hooks(demo):
    on_event, wait_for, _ = _events()
    model = demo.model
    hooks = lambda: sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    before_hooks, before_threads = hooks(), threading.active_count()
    stepper = Stepper(demo, build_request("Describe the image.", [], images=[scene(2).image]), breakpoints={"sync"}, on_event=on_event)
    stepper.start()
    wait_for(lambda s: ("paused", "sync") in s)
    stepper.cancel()
    assert not stepper.running
    wait_for(lambda s: ("cancelled", None) in s)
    assert threading.active_count() == before_threads and hooks() == before_hooks
