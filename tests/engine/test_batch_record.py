"""What vLLM batched together, as qdebug's plugin records it (`batches.jsonl`), against a real server: a burst sent
with fresh cache identities really shares encoder calls, the records name the requests whose rows the calls made, and
under the batch-dependent preset an item's encoder rows differ between its run alone and the burst."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from qdebug.engine.batch_log import BATCH_STEP, ENCODER_CALL, parse_batch_log, read_batch_log

from .client import SAMPLE, request_for
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
IMAGES = sorted(p.name for p in SAMPLE.glob("*.png")) * 2  # six scenes, each twice (distinct items: fresh uuids)
TAG = "batchrec"
BURSTS = 3


@pytest.fixture(scope="module")
def ran(vllm_py, tmp_path_factory):
    """A traced vLLM with `batch-dependent-encoder` planted; each request once alone (one at a time), then all at
    once (long enough answers that the engine is busy as they arrive); returns (server, batch log, traces, {name:
    encoder rows}, the batch log as the endpoint plugin serves it)."""
    from qdebug.commands.engine_diff import await_trace
    from qdebug.replay.engine import encoded_rows
    from qdebug.replay.endpoint import EndpointSettings, chat_body, isolated

    where = tmp_path_factory.mktemp("batch-record")
    # QDEBUG_VLLM_GATHER_MS: the idle engine gathers each burst, so it shares encoder calls as on a loaded server
    env = {"QDEBUG_VLLM_INJECT": "batch-dependent-encoder", "VLLM_PLUGINS": "qdebug", "QDEBUG_VLLM_GATHER_MS": "1000"}
    settings = EndpointSettings(url="unused")
    bodies = {f"req-{i}": chat_body(request_for(image, max_new_tokens=16), "demo", top_logprobs=0) for i, image in enumerate(IMAGES)}

    def send(rid: str, phase: str) -> str:
        name = f"{TAG}.{rid}.{phase}"
        body = {**isolated(bodies[rid], settings, rid, phase), "vllm_xargs": {"qdebug_trace": True, "qdebug_id": name}}
        response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
        assert response.status_code == 200, response.text
        return name

    with VllmServer(vllm_py, where, trace_dir=where / "traces", extra_env=env) as server:
        names = [send(rid, "reference") for rid in bodies]  # alone: nothing else in flight
        for k in range(1, BURSTS + 1):  # whether two arrive within one step is the engine's timing: up to BURSTS tries
            with ThreadPoolExecutor(len(bodies)) as pool:
                names += list(pool.map(lambda rid: send(rid, f"burst-{k}"), bodies))
            for name in names:
                await_trace(where / "traces", name, 120)  # its records are written before its trace
            if any(len(c.items) > 1 for c in read_batch_log(where / "traces").shared(burst_names(k)).encoder_calls):
                break
        traces = {name: await_trace(where / "traces", name, 120) for name in names}
        fetched = httpx.get(f"{server.url}/qdebug/traces/batches.jsonl", timeout=60)
        yield server, read_batch_log(where / "traces"), traces, {n: encoded_rows(t) for n, t in traces.items()}, fetched


def burst_names(k: int | None = None) -> list[str]:
    """The names of burst k's requests (every burst's when k is None)."""
    return [f"{TAG}.req-{i}.burst-{b}" for b in ([k] if k else range(1, BURSTS + 1)) for i in range(len(IMAGES))]


def test_alone_is_alone_and_the_burst_shares_encoder_calls_naming_its_requests(ran):
    server, log, traces, _, fetched = ran
    for i in range(len(IMAGES)):  # each reference run encoded its one image in a call of its own
        alone = f"{TAG}.req-{i}.reference"
        assert [c.items for c in log.calls_of(alone)] == [[(alone, 0)]]
        assert all(s.names == [alone] for s in log.steps if s.carries(alone)), [s for s in log.steps if s.carries(alone)]
    sent = [name for name in burst_names() if name in traces]
    last = sent[-len(IMAGES):]  # the burst that co-batched (the fixture stops at the first that did)
    assert max(len(c.items) for c in log.shared(last).encoder_calls) >= 2, log.shared(last).described()
    shared = log.shared(sent)
    carried = [item for call in shared.encoder_calls for item in call.items]
    assert sorted(carried) == sorted((name, 0) for name in sent)  # every burst image encoded once, by these calls only
    for call in shared.encoder_calls:  # a call runs in a step in which all its requests compute prompt rows
        step = next(s for s in log.steps if s.step == call.step and s.worker == call.worker)
        assert set(call.names) <= set(step.prefill), (call, step)
    for name in sent:  # each burst request's trace names the same calls
        own = [(c["call"], [tuple(i) for i in c["items"]]) for c in traces[name].meta.engine["encoder_calls"]]
        assert own == [(c.call, c.items) for c in log.calls_of(name)]
        assert any(s.carries(name) for s in shared.steps)
    over_http = parse_batch_log(fetched.text.splitlines())  # the endpoint plugin serves the same log
    assert fetched.status_code == 200 and over_http.encoder_calls == log.encoder_calls and over_http.steps == log.steps
    assert {ENCODER_CALL, BATCH_STEP} <= {line.split('"record":"')[1].split('"')[0] for line in fetched.text.splitlines()}


def test_under_the_batch_dependent_preset_an_items_rows_follow_its_encoder_call(ran):
    import torch

    from qdebug.engine.batch_faults import mixed

    server, log, _, rows, _ = ran
    assert server.said("injected fault batch-dependent-encoder"), server.log_text()[-4000:]
    sent = [name for name in burst_names() if name in rows]
    alone = {name: rows[name.rsplit(".", 1)[0] + ".reference"] for name in sent}
    together = 0
    for name in sent:
        (call,) = log.calls_of(name)
        others = [alone[n] for n in call.names if n != name]
        got, own = rows[name], alone[name]
        if not others:  # encoded alone in the burst too: the same rows as alone
            torch.testing.assert_close(got, own, rtol=1e-4, atol=1e-4)
            continue
        together += 1
        assert (got - own).abs().max() > 0.1 * own.abs().max(), name  # the burst changed its rows
        # and by exactly what the call's other items (as the record names them) make of them
        torch.testing.assert_close(got, mixed(own, others), rtol=1e-3, atol=1e-3)
    assert together >= 2
