"""The instrument does not change what it measures: traced logits and tokens equal an untraced generate."""

import torch

from qdebug.trace.request import build_request
from qdebug.trace.runner import prepare, trace_request
from tests.conftest import scene


def _untraced(loaded, request):
    inputs = prepare(loaded, request).inputs
    with torch.inference_mode():
        out = loaded.model.generate(
            **inputs, max_new_tokens=request.max_new_tokens, do_sample=False, output_logits=True, return_dict_in_generate=True
        )
    return out.sequences[0, inputs["input_ids"].shape[1] :].tolist(), [l[0] for l in out.logits]


def test_traced_equals_plain_eager_generate(demo, plain_demo):
    for seed in (1, 2, 3):
        s = scene(seed)
        request = build_request("What do you see?", [], images=[s.image], max_new_tokens=12)
        tokens, logits = _untraced(plain_demo, request)
        trace = trace_request(demo, request)
        assert trace.generated_ids == tokens
        assert len(trace.steps) == len(logits)
        for k, ref in enumerate(logits):
            assert torch.equal(trace.tensors[f"step.{k}.logits"], ref.float()), f"step {k} logits differ"


def test_untapped_qdebug_kernel_equals_plain_eager(demo, plain_demo):
    s = scene(7)
    request = build_request("Describe the image.", [], images=[s.image], max_new_tokens=10)
    assert _untraced(demo, request)[0] == _untraced(plain_demo, request)[0]
    a, b = _untraced(demo, request)[1], _untraced(plain_demo, request)[1]
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_hooks_are_removed_after_a_trace_and_after_a_failure(demo):
    model = demo.model
    counts = lambda: sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    before = counts()
    s = scene(4)
    trace_request(demo, build_request("Describe the image.", [], images=[s.image], max_new_tokens=3))
    assert counts() == before

    def boom(name):
        if name == "layer.1":
            raise RuntimeError("stop here")

    try:
        trace_request(demo, build_request("Describe the image.", [], images=[s.image], max_new_tokens=3), on_stage=boom)
    except RuntimeError:
        pass
    assert counts() == before


def test_concurrent_traces_on_one_model_equal_sequential(demo):
    import threading

    scenes = [scene(20 + i) for i in range(4)]
    requests = [build_request("Describe the image.", [], images=[s.image], max_new_tokens=10) for s in scenes]
    sequential = [trace_request(demo, r).generated_ids for r in requests]
    results = [None] * 4

    def work(i):
        results[i] = trace_request(demo, requests[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.generated_ids for r in results] == sequential
    # Each trace recorded only its own request's image rows.
    for r, s in zip(results, scenes):
        assert r.stages["sync"].ok
