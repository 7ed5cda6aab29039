"""Issue 35 against a real vLLM running qdebug's plugins: the trace folder's files are the only ones read, served or
written (item 3: a symlinked or hard-linked index.jsonl, item 9: an index naming `../x.qdt` or `/etc/passwd`); one
unreadable trace leaves that request without engine evidence and the rest of the report stands (item 8); a trace of
another model is refused by `replay --endpoint --engine-traces` as by `diff --engine`, with exit 5 (item 7); an
over-long qdebug_id is not stored (item 18); bad settings and a read-only folder are said, once (item 19).

Two servers in all: one traced server for the module (its folder is made hostile test by test and put back), one
whose trace folder cannot be written. The client sees the server's folder through a mirror the test fills (a
thread copying what the plugin writes, with the hostile change applied), so what qdebug reads is exactly what the
test chose, whatever the timing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from qdebug.engine.trace_dir import INDEX, append_index_line, read_index
from tests.endpoint.conftest import run_qdebug, small_capture

from .client import SAMPLE, request_for, send
from .vllm_server import VllmServer

pytestmark = pytest.mark.vllm
IMAGE, PROMPT = str(SAMPLE / "red_circle_top_left.png"), "Describe the image."
ANSWER = "a red circle in the top left"


@pytest.fixture(scope="module")
def server(vllm_py, tmp_path_factory):
    """The demo on vLLM with both plugins, tracing tagged requests; QDEBUG_VLLM_KEEP has a value it does not know."""
    work = tmp_path_factory.mktemp("hostile-folder")
    traces = work / "traces"
    with VllmServer(vllm_py, work, trace_dir=traces, extra_env={"VLLM_PLUGINS": "qdebug", "QDEBUG_VLLM_KEEP": "garbage"}) as srv:
        srv.traces, srv.work = traces, work
        yield srv


def wait_for(condition, what: str, limit: float = 120.0):
    """Poll `condition` until it returns something true (bounded); that value."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Mirror:
    """Copies each new entry of the server's trace folder into `dst` as `change(entry, src, dst)` decides (it writes
    the trace and returns the index line to append, or None), on a thread, until stopped."""

    def __init__(self, src: Path, dst: Path, change) -> None:
        self.src, self.dst, self.change = src, dst, change
        dst.mkdir(parents=True, exist_ok=True)
        self.seen = {e.get("id") for e in read_index(src)}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Mirror":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stop.is_set():
            for entry in list(read_index(self.src)):
                if entry.get("id") in self.seen:
                    continue
                self.seen.add(entry.get("id"))
                line = self.change(entry, self.src, self.dst)
                if line is not None:
                    append_index_line(self.dst, line)
            time.sleep(0.05)


def copy_as_is(entry: dict, src: Path, dst: Path) -> dict:
    shutil.copy(src / entry["trace"], dst / entry["trace"])
    return entry


def one_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("qdebug: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return errors[0]


# item 3 ---------------------------------------------------------------------------------------------------------
def test_a_linked_index_is_neither_served_nor_written_through(server):
    secret = server.work / "secret.txt"
    secret.write_text("SECRET\n")
    index, aside = server.traces / INDEX, server.traces / "index.aside"
    server.traces.mkdir(exist_ok=True)
    if index.exists():
        os.rename(index, aside)
    try:
        for n, make in enumerate((os.symlink, os.link)):  # a symbolic link, then a hard link, to a file outside
            make(secret, index)
            route = httpx.get(f"{server.url}/qdebug/traces/index.jsonl", timeout=10)
            assert route.status_code == 404 and "SECRET" not in route.text, route.text
            assert send(server, request_for("red_circle_top_left.png"), f"through-link-{n}").strip() == ANSWER
            wait_for(lambda: server.log_text().count("could not write the trace of request") > n, "the plugin's write to fail")
            assert secret.read_text() == "SECRET\n"  # nothing appended to the file outside the folder
            index.unlink()
        os.symlink(secret, server.traces / "leak.qdt")  # a trace name that is a link to a file elsewhere
        os.link(secret, server.traces / "hard.qdt")
        for name in ("leak.qdt", "hard.qdt"):
            got = httpx.get(f"{server.url}/qdebug/traces/{name}", timeout=10)
            assert got.status_code == 404 and "SECRET" not in got.text, name
    finally:
        for name in (INDEX, "leak.qdt", "hard.qdt"):
            if (server.traces / name).is_symlink() or (server.traces / name).exists():
                (server.traces / name).unlink()
        if aside.exists():
            os.rename(aside, index)


# item 18, item 19 (QDEBUG_VLLM_KEEP) ------------------------------------------------------------------------------
def test_an_over_long_qdebug_id_is_not_stored_and_the_request_is_traced_under_the_servers_id(server):
    def entries() -> list[dict]:
        return list(read_index(server.traces))

    exact = "k" * 256
    send(server, request_for("red_circle_top_left.png"), exact)
    wait_for(lambda: any(e.get("qdebug_id") == exact for e in entries()), "the 256-character id in the index")
    size, count = (server.traces / INDEX).stat().st_size, len(entries())
    assert send(server, request_for("red_circle_top_left.png"), "x" * 1_000_000).strip() == ANSWER
    entry = wait_for(lambda: entries()[count:] and entries()[count], "the over-long request's index line")
    assert entry["qdebug_id"] == entry["id"] and entry["trace"].endswith(".qdt")  # the server's own id
    assert (server.traces / INDEX).stat().st_size - size < 2_000  # it grew 2 MB before
    assert "qdebug_id is 1,000,000 characters (at most 256); traced under the server's id" in server.log_text()
    assert (server.traces / entry["trace"]).stat().st_size < 4_000_000


def test_an_unknown_keep_value_is_said_and_every_row_is_kept(server):
    from qdebug.commands.engine_diff import await_trace
    from qdebug.trace.tensor_names import TensorKind

    assert "QDEBUG_VLLM_KEEP=garbage: expected hidden or last; keeping every prompt row (hidden)" in server.log_text()
    send(server, request_for("green_triangle_top_right.png"), "keep-garbage")
    trace = await_trace(server.traces, "keep-garbage", 60)
    assert trace.meta.keep_hidden is True and trace.tensor(TensorKind.LAYER_HIDDEN, layer=0).shape[-2] == len(trace.input_ids)


# item 8, item 9 (replay) -----------------------------------------------------------------------------------------
def test_one_unreadable_trace_costs_only_that_requests_engine_evidence(server, tmp_path):
    capture = small_capture(tmp_path, 3)
    ids = [json.loads(line)["id"] for line in capture.read_text().splitlines()]
    corrupt, outside = ids[0], ids[1]

    def change(entry: dict, src: Path, dst: Path) -> dict:
        qid = entry.get("qdebug_id", "")
        if qid.endswith(f".{corrupt}.burst-1"):  # a truncated trace where the trace should be
            (dst / entry["trace"]).write_bytes((src / entry["trace"]).read_bytes()[:500])
            return entry
        if qid.endswith(f".{outside}.burst-1"):  # the index names a file beside the folder, a good trace
            shutil.copy(src / entry["trace"], dst.parent / "good.qdt")
            return {**entry, "trace": "../good.qdt"}
        return copy_as_is(entry, src, dst)

    out = tmp_path / "r.json"
    with Mirror(server.traces, tmp_path / "mirror", change):
        result = run_qdebug("replay", str(capture), "--endpoint", server.url, "--concurrency", "3", "--engine-traces",
                            str(tmp_path / "mirror"), "--timeout", "60", "--json", str(out))
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    doc = json.loads(out.read_text())  # the report stands
    assert {r["id"]: r["verdict"] for r in doc["requests"]} == {rid: "ok" for rid in ids}
    partial = {f["request_id"]: f["message"] for f in doc["findings"] if f["kind"] == "partial_comparison"}
    assert set(partial) == {corrupt, outside}, doc["findings"]
    assert "could not be read" in partial[corrupt] and "no engine evidence" in partial[corrupt]
    assert "'../good.qdt'" in partial[outside] and "not a trace file of that folder" in partial[outside]
    assert result.returncode == 0, result.stderr[-2000:]  # all ok: warnings do not fail the run


# item 7 ----------------------------------------------------------------------------------------------------------
def another_model(entry: dict, src: Path, dst: Path) -> dict:
    """The trace as a server of another checkpoint would have written it (its meta says which model ran)."""
    from qdebug.trace.schema import load_trace, save_trace

    trace = load_trace(src / entry["trace"])
    trace.meta.model = {**trace.meta.model, "spec": "other-model", "path": "/models/other-model"}
    save_trace(trace, dst / entry["trace"])
    return entry


def test_replay_and_diff_refuse_traces_of_another_model_alike(server, tmp_path):
    capture = small_capture(tmp_path, 2)
    with Mirror(server.traces, tmp_path / "replay", another_model):
        replay = run_qdebug("replay", str(capture), "--endpoint", server.url, "--engine-traces", str(tmp_path / "replay"),
                            "--timeout", "60", "--json", str(tmp_path / "r.json"))
    with Mirror(server.traces, tmp_path / "diff", another_model):
        diff = run_qdebug("diff", IMAGE, PROMPT, "--engine", server.url, "--engine-traces", str(tmp_path / "diff"), "--timeout", "60")
    for result in (replay, diff):
        line = one_line(result)
        assert result.returncode == 5, line
        assert "records model 'other-model' (/models/other-model), but the server was asked for 'demo'" in line
    assert not (tmp_path / "r.json").exists()
    with Mirror(server.traces, tmp_path / "same", copy_as_is):  # the same traces unchanged: accepted (the rule can pass)
        same = run_qdebug("diff", IMAGE, PROMPT, "--engine", server.url, "--engine-traces", str(tmp_path / "same"), "--timeout", "60")
    assert same.returncode == 0, same.stderr[-2000:]


# item 9 (diff) ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../good.qdt", "/etc/passwd"])
def test_diff_reads_no_trace_outside_the_folder(server, tmp_path, name):
    def change(entry: dict, src: Path, dst: Path) -> dict:
        shutil.copy(src / entry["trace"], dst.parent / "good.qdt")  # a good trace, beside the folder
        return {**entry, "trace": name}

    with Mirror(server.traces, tmp_path / "mirror", change):
        result = run_qdebug("diff", IMAGE, PROMPT, "--engine", server.url, "--engine-traces", str(tmp_path / "mirror"), "--timeout", "60")
    line = one_line(result)
    assert result.returncode == 1 and f"names trace {name!r}" in line and "not a trace file of that folder" in line, line


# item 19 (a folder nothing can be written to) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def read_only_folder(tmp_path_factory):
    """A trace folder nothing can be created in, root or not: immutable (chattr +i) for root, mode 555 otherwise."""
    folder = tmp_path_factory.mktemp("read-only") / "traces"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    assert made.returncode == 0, f"chattr +i: {made.stderr} (root needs an immutable folder to meet a read-only one)"
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_trace_folder_is_said_once_and_requests_are_served(vllm_py, read_only_folder, tmp_path):
    with VllmServer(vllm_py, tmp_path, trace_dir=read_only_folder, trace_all=True) as srv:
        assert send(srv, request_for("red_circle_top_left.png"), tagged=False).strip() == ANSWER
        log = srv.log_text()
    assert log.count("qdebug: not tracing this worker") == 1, log[-3000:]
    said = next(line for line in log.splitlines() if "qdebug: not tracing this worker" in line)
    assert str(read_only_folder) in said and ("is not writable" in said or "nothing can be created in" in said), said
    assert "tracing every request" not in log
    assert list(read_only_folder.iterdir()) == []
