"""`qdebug replay CAPTURE --endpoint URL --engine-traces DIR --model demo` (the documented command, its defaults: cold
phases with fresh cache identities, then a warm phase with production caching) against a real vLLM at block size 32
with qdebug's plugin. Under each fault of the cache class the requests a cache served another image are
`cache_contaminated`, naming the cache, the reused range and the donor, exit 1; which requests those are is decided here
from the images the test sent and the plugin's batch log, never from the report's findings. A clean server, the same
image sent twice and a long shared prefix: every request ok, exit 0, and the legitimate reads are shown."""

from __future__ import annotations

import pytest

from .cache_story import PIPELINE, Sent, assert_one_cache_story, logged_reads, replay, served_other_content, write_capture
from .test_cache_provenance import SYSTEM, scene
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm


def server(vllm_py, where, fault: str | None) -> VllmServer:
    """vLLM with the plugin on (traces and batch log in where/traces), block size 32, `fault` planted."""
    env = {"VLLM_PLUGINS": "qdebug", **({"QDEBUG_VLLM_INJECT": fault} if fault else {})}
    s = VllmServer(vllm_py, where, trace_dir=where / "traces", extra_env=env, extra_args=("--block-size", "32"))
    s.traces = where / "traces"
    return s


@pytest.fixture(scope="module", params=["short-media-hash", "encoder-cache-by-size"])
def faulty(request, vllm_py, tmp_path_factory):
    where = tmp_path_factory.mktemp(request.param)
    with server(vllm_py, where, request.param) as s:
        yield request.param, s


@pytest.fixture(scope="module")
def clean(vllm_py, tmp_path_factory):
    where = tmp_path_factory.mktemp("clean-caches")
    with server(vllm_py, where, None) as s:
        yield s


def test_each_cache_fault_flags_the_requests_served_another_image(faulty, tmp_path):
    fault, s = faulty
    sent = {f"req-{i + 1:02d}": Sent(scene(i)) for i in range(8)}  # one prompt, eight different 224x224 images
    doc, result = replay(s, write_capture(tmp_path / "capture.jsonl", sent), tmp_path / "r.json")
    reads = logged_reads(s.traces, doc["engine_traces"]["tag"], list(sent))
    wrong = [r for r in reads if served_other_content(r, sent)]
    affected = {r.reader for r in wrong}
    assert len(affected) >= 4, (fault, reads)  # the fault met: most requests were served another's image
    by_id = {r["id"]: r for r in doc["requests"]}
    assert {rid for rid, r in by_id.items() if r["verdict"] == "cache_contaminated"} == affected, (fault, [(r["id"], r["verdict"]) for r in doc["requests"]])
    assert {r["verdict"] for rid, r in by_id.items() if rid not in affected} <= {"ok"}
    assert result.returncode == 1
    for rid in affected:
        mine = [r for r in wrong if r.reader == rid]
        first = min(mine, key=lambda r: PIPELINE.index(r.cache)).cache  # the first cache in pipeline order that served another's
        out = by_id[rid]
        assert out["stage"] == first, (rid, out["stage"], [r.cache for r in mine])
        behind = [r for r in mine if r.cache == first]
        assert out["donor"] in {r.donor for r in behind}, (rid, out["donor"])
        assert (out["cache_read"]["start"], out["cache_read"]["end"]) in {(r.doc["start"], r.doc["end"]) for r in behind}
        assert out["cache_read"]["cache"] == first and out["cache_read"]["reuse"] == "other_content"
        assert out["warm_verdict"] == "cache_contaminated"  # the warm run met the fault as production does
    # every read of another's image is its own finding, naming the reader's run, the cache and the donor
    errors = [f for f in doc["findings"] if f["kind"] == "cache_read" and f["severity"] == "error"]
    assert sorted((f["request_id"], f["stage"], f["donor"]) for f in errors) == sorted((r.reader, r.cache, r.donor) for r in wrong)
    for r in wrong:
        assert any(f"request {r.reader} ({r.phase} run): the {r.cache} served" in f["message"] for f in errors), r
    assert_one_cache_story(doc, result, tmp_path / "r.qdr")


def test_a_clean_server_reads_caches_legitimately_and_every_request_is_ok(clean, tmp_path):
    sent = {"req-01": Sent(scene(0)), "req-02": Sent(scene(0)),  # the same image sent twice
            "req-03": Sent(scene(1)), "req-04": Sent(scene(2)),
            **{f"req-0{i}": Sent(scene(i), prefix=SYSTEM) for i in range(5, 9)}}  # a long shared prefix before each image
    doc, result = replay(clean, write_capture(tmp_path / "capture.jsonl", sent), tmp_path / "r.json")
    assert {r["id"]: r["verdict"] for r in doc["requests"]} == {rid: "ok" for rid in sent}, doc["findings"]
    assert result.returncode == 0, result.stderr[-2000:]
    reads = logged_reads(clean.traces, doc["engine_traces"]["tag"], list(sent))
    assert not [r for r in reads if served_other_content(r, sent)], reads  # a clean engine serves no one another's content
    same = [r for r in reads if r.doc["reuse"] == "same_content"]
    # the image sent twice: whichever of the two the front end processed second (both arrive at once) is served the other's
    assert any({r.reader, r.donor} == {"req-01", "req-02"} and r.phase == "warm" for r in same), same
    by_id = {r["id"]: r for r in doc["requests"]}
    info = {f["request_id"]: f["message"] for f in doc["findings"] if f["kind"] == "cache_read" and f["severity"] == "info"}
    for r in same:  # each legitimate read shown: the cache, how many positions or which item, from whom
        shown = [c for c in by_id[r.reader]["cache_reads"] if c["phase"] == r.phase and c["cache"] == r.cache and c["start"] == r.doc["start"]]
        assert shown and shown[0]["donor"] == r.donor and shown[0]["reuse"] == "same_content", (r, by_id[r.reader]["cache_reads"])
        assert shown[0]["positions"] == r.doc["end"] - r.doc["start"] and shown[0]["item"] == r.doc["item"]
        assert f"{r.phase}: {r.cache} " in info[r.reader] and f"from {r.donor} ({r.donor_phase})" in info[r.reader], info[r.reader]
    assert not [f for f in doc["findings"] if f["kind"] == "cache_read" and f["severity"] == "error"]
    assert_one_cache_story(doc, result, tmp_path / "r.qdr")
