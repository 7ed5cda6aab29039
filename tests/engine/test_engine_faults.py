"""The seeds' bugs planted inside a real vLLM (QDEBUG_VLLM_INJECT) and found by qdebug from outside and inside it:
seed 001's head-first layout on a softmax family and on Qwen3.5's gated delta rule, seed 000's shared visual buffer."""

from __future__ import annotations

import json
import re

import pytest

from tests.endpoint.conftest import SAMPLE, run_qdebug

from .endpoint_story import assert_one_story, records
from .endpoint_story import replay as story_replay
from .row_evidence import foreign_rows
from .families import build
from .vllm_server import DEMO, VllmServer

pytestmark = pytest.mark.vllm
IMAGE, PROMPT = str(SAMPLE / "red_circle_top_left.png"), "Describe the image."


def faulty_server(vllm_py, where, inject: str, model=DEMO, dtype: str = "float32", seed: int = 0, extra_env: dict | None = None) -> VllmServer:
    """A traced vLLM with one of the plugin's faults planted."""
    env = {"QDEBUG_VLLM_INJECT": inject, "QDEBUG_VLLM_SEED": str(seed), **(extra_env or {})}
    server = VllmServer(vllm_py, where, model=model, trace_dir=where / "traces", dtype=dtype, extra_env=env)
    server.traces = where / "traces"
    return server


def engine_diff(server, model, out) -> tuple[dict, object]:
    result = run_qdebug("diff", IMAGE, PROMPT, "--engine", server.url, "--engine-traces", str(server.traces), "--model", str(model),
                        "--json", str(out), env={"COLUMNS": "200"})
    return json.loads(out.read_text()), result


def assert_localised(doc: dict, result, layer: int) -> None:
    """The diff parts at layer.L (every stage before it agrees) and names the layout the engine's kernel received."""
    assert result.returncode == 1, result.stdout + result.stderr  # a found problem fails the command
    assert doc["first_divergence"]["stage"] == f"layer.{layer}", doc["first_divergence"]
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    before = ["preprocess", "encode", "sync", *[f"layer.{n}" for n in range(layer)]]
    assert all(verdicts[s] == "ok" for s in before) and verdicts[f"layer.{layer}"] == "diverged", verdicts
    layout = [f for f in doc["findings"] if f["kind"] == "layout"]
    assert [f["stage"] for f in layout] == [f"layer.{layer}"], doc["findings"]
    assert "head and token axes swapped" in layout[0]["message"] and "vLLM's kernel" in layout[0]["message"]
    assert f"layer.{layer}" in result.stdout and "head and token axes swapped" in result.stdout
    assert doc["b"]["text"] in result.stdout  # the served answer is shown, whatever it reads on random weights


@pytest.fixture(scope="module")
def head_first_demo(vllm_py, tmp_path_factory):
    with faulty_server(vllm_py, tmp_path_factory.mktemp("head-first-demo"), "head-first:2") as server:
        yield server


def test_head_first_in_the_softmax_kernel_is_localised_to_its_layer(head_first_demo, tmp_path):
    doc, result = engine_diff(head_first_demo, "demo", tmp_path / "d.json")
    assert_localised(doc, result, 2)
    assert "injected" in head_first_demo.log_text() and "layer 2 (softmax attention kernel)" in head_first_demo.log_text()


def test_replay_with_local_references_flags_the_faulty_server(head_first_demo, tmp_path):
    out = tmp_path / "r.json"
    result = run_qdebug("replay", str(SAMPLE / "capture.jsonl"), "--endpoint", head_first_demo.url, "--concurrency", "4",
                        "--model", "demo", "--device", "cpu", "--json", str(out))
    doc = json.loads(out.read_text())
    assert "server_mismatch" in {f["kind"] for f in doc["findings"]}, doc["findings"]
    assert result.returncode == 1


def test_replay_with_engine_traces_says_server_mismatch_at_layer_2_and_never_contaminated(head_first_demo, tmp_path):
    doc, result = story_replay(head_first_demo, tmp_path / "r.json", "--repeat", "2", "--model", "demo", "--device", "cpu")
    assert_one_story(doc, result)
    verdicts = {r["id"]: (r["verdict"], r["stage"]) for r in doc["requests"]}
    # the engine alone parts from the model at layer.2 for every request (the kernel's layout is wrong for all of them)
    assert set(verdicts.values()) == {("server_mismatch", "layer.2")}, verdicts
    assert not [f for f in doc["findings"] if f["kind"] in ("contamination", "engine_contamination")], doc["findings"]
    mismatch = [f for f in doc["findings"] if f["kind"] == "server_mismatch"]
    assert {f["request_id"] for f in mismatch} == set(verdicts) and {f["stage"] for f in mismatch} == {"layer.2"}
    layout = [f for f in doc["findings"] if f["kind"] == "layout"]
    assert layout and {f["stage"] for f in layout} == {"layer.2"} and "head and token axes swapped" in layout[0]["message"]
    assert "server_mismatch @layer.2" in result.stdout


def test_head_first_in_qwen3_5s_gated_delta_rule_is_localised_to_its_layer(vllm_py, tmp_path_factory, tmp_path):
    where = tmp_path_factory.mktemp("head-first-qwen3_5")
    checkpoint = build("qwen3_5", where / "checkpoint")  # layers [linear, full, linear, full]; key heads < value heads
    with faulty_server(vllm_py, where, "head-first:2", model=checkpoint, dtype="bfloat16") as server:
        doc, result = engine_diff(server, checkpoint, tmp_path / "d.json")
        assert "layer 2 (gated-delta-rule core)" in server.log_text()
    assert_localised(doc, result, 2)
    assert doc["tolerance"]["atol"] > 1e-5  # compared at bfloat16's tolerance, the engine's dtype


def burst(server, out, repeat: int = 1) -> tuple[dict, object]:
    # the bursts' rows are this test's subject: the cold phases only (the warm phase: tests/engine/test_replay_caches.py)
    return story_replay(server, out, "--repeat", str(repeat), "--engine-caches", "cold")


BURST_TRIES = 3  # replays of five bursts each; the fault needs two requests' prompts in one scheduler step


def test_a_shared_visual_buffer_in_the_engine_is_found_and_its_donors_match_the_engines_rows(vllm_py, tmp_path_factory, tmp_path):
    # Five bursts a replay: the fault acts on the images of one scheduler step, in an order of writes and reads drawn
    # per step, and a burst can trickle in one request per step; two prompts in one step may also be written and read
    # back in turn, which contaminates no one (a clean-clone CI run had a shared step and every request ok). A replay
    # in which the engine put no request's rows in another's stream tests nothing: it is run again, every replay held
    # to the same story, and never contaminating fails.
    shared: list[bool] = []
    with faulty_server(vllm_py, tmp_path_factory.mktemp("shared-buffer"), "shared-visual-buffer", seed=0) as server:
        for attempt in range(BURST_TRIES):
            before = set(server.traces.glob("*.qdt"))
            doc, result = burst(server, tmp_path / f"r{attempt}.json", repeat=5)
            shared.append(_shared_a_step(set(server.traces.glob("*.burst-*.qdt")) - before))
            assert_one_story(doc, result)
            contaminated = {r["id"]: r for r in doc["requests"] if r["verdict"] == "contaminated"}
            # the evidence: the rows the engine's own traces of each burst hold at each request's placeholders, whose
            # encoder rows they are (read here, row by row, not by qdebug's analysis)
            shown = _rows_not_own(server.traces, doc)
            assert {rid for rid, _ in shown} == set(contaminated), (attempt, sorted(shown), sorted(contaminated))
            # and the report's own engine findings say the same (one story)
            assert {rid for rid, _ in _engine_contamination(doc)} == set(contaminated), (attempt, sorted(contaminated))
            if contaminated:
                break
        else:
            pytest.fail(f"no request contaminated in {BURST_TRIES} replays of 5 bursts (two prompts shared a step: {shared})")
    assert not [f for f in doc["findings"] if f["kind"] == "partial_comparison"], doc["findings"]
    # one story: each burst's donors are that burst's engine evidence (never only burst 1's), each a request that
    # shared a step with it in that burst by the plugin's batch records (the fault acts on one step's images)
    tag = doc["engine_traces"]["tag"]
    for rid, r in contaminated.items():
        for k, (verdict, donors) in enumerate(zip(r["burst_verdicts"], r["burst_donors"]), start=1):
            assert (verdict == "contaminated") == ((rid, k) in shown), (rid, k, r)
            rows = shown.get((rid, k), [])
            must = {next(iter(owners)) for owners in rows if len(owners) == 1}  # a row only one other request's output holds
            may = set().union(*rows)  # a row of plain background may be several requests' rows
            assert must <= set(donors) <= may, (rid, k, donors, must, may)
            _, steps = records(server.traces, tag, f"burst-{k}")
            assert all(any(rid in s and d in s for s in steps) for d in must), (rid, k, must, steps)
        assert r["stage"] == "sync"
        bursts = {tuple(d) for d in r["burst_donors"] if d}
        assert r["donor"] == (next(iter(bursts))[0] if len(bursts) == 1 and len(next(iter(bursts))) == 1 else None), r


def _rows_not_own(folder, doc: dict) -> dict:
    """(request, burst) → for each row of that stream that is not its own, the requests whose encoder output holds it
    (row_evidence.foreign_rows), from the engine's traces of each burst of this replay (found by their qdebug_id in the
    folder's index); only streams with such rows."""
    from qdebug.engine.trace_dir import read_index
    from qdebug.trace.schema import load_trace

    tag, ids = doc["engine_traces"]["tag"], [r["id"] for r in doc["requests"]]
    files = {line.get("qdebug_id"): line.get("trace") for line in read_index(folder)}
    shown: dict = {}
    for k in range(1, len(doc["requests"][0]["burst_verdicts"]) + 1):
        traces = {rid: load_trace(folder / files[f"{tag}.{rid}.burst-{k}"]) for rid in ids if f"{tag}.{rid}.burst-{k}" in files}
        assert len(traces) == len(ids), (k, sorted(traces))
        for rid, rows in foreign_rows(traces).items():
            if rows:
                shown[(rid, k)] = rows
    return shown


def _engine_contamination(doc: dict) -> dict:
    """(request, burst) → the requests whose rows the engine put in that stream, read from engine_contamination findings."""
    shown: dict = {}
    for f in doc["findings"]:
        if f["kind"] == "engine_contamination":
            k = int(re.search(r"\(burst (\d+)\)", f["message"]).group(1))
            shown[(f["request_id"], k)] = ({f["donor"]} | set(re.findall(r"\d+ from (req-\d+)", f["message"]))) - {None}
    return shown


def test_a_clean_engine_under_the_same_burst_is_all_ok_five_times(traced_server, tmp_path):
    doc, result = burst(traced_server, tmp_path / "r.json", repeat=5)
    assert {r["verdict"] for r in doc["requests"]} == {"ok"}, [(r["id"], r["verdict"]) for r in doc["requests"]]
    assert not [f for f in doc["findings"] if f["kind"] in ("engine_contamination", "engine_disagreement", "partial_comparison")], doc["findings"]
    assert_one_story(doc, result)
    assert result.returncode == 0, result.stderr


def _shared_a_step(paths) -> bool:
    """Whether two burst requests' prompts ran in one scheduler step, from the engine traces' own record (`paths`: one
    replay's burst traces) of their first step (requests and tokens flattened together) and of who shared their steps."""
    from qdebug.trace.schema import load_trace

    firsts = {}
    for path in paths:
        engine = load_trace(path).meta.engine
        firsts[engine["request_id"]] = engine
    return any(other in firsts and firsts[other]["batches"][:1] == e["batches"][:1]
               for e in firsts.values() for other in e["co_scheduled"])
