"""What the command pages (docs/commands/*.md) say a run gives, held to runs of the installed `qdebug` on the demo and
its sample data: the JSON keys each page names, the exit codes it gives, the PNG it describes, the ONNX figures, the
filtered events a log replay prints, the fleet's default host and what `qdebug serve` answers."""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.installed import qdebug
from tests.docs_text import DOCS
from tests.servers import Server, free_port

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
IMAGE = SAMPLE / "red_circle_top_left.png"
PROMPT = "Describe the image."


def _page(name: str) -> str:
    """A command page's text with its line breaks and runs of spaces as single spaces."""
    return " ".join((DOCS / "commands" / name).read_text(encoding="utf-8").split())


def _named_keys(page: str, start: str, end: str) -> set[str]:
    """The JSON keys a page names between `start` and `end`: its backticked lower-case words."""
    text = _page(page)
    assert start in text and end in text.split(start, 1)[1], (page, start, end)
    span = text.split(start, 1)[1].split(end, 1)[0]
    return {word for word in re.findall(r"`([a-z_]+)`", span)}


def _keys(doc) -> set[str]:
    """Every key of a JSON document, at any depth."""
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in _keys(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in _keys(v)}
    return set()


def test_attn_json_has_every_key_its_page_names_and_the_exit_codes_it_gives(tmp_path):
    """attn.md: the JSON keys; exit 2 for bad input, 3 for a model that cannot be loaded, 4 for a device that is not there."""
    named = _named_keys("attn.md", "JSON keys:", "Exit code 1")
    assert {"model", "architecture", "grid_thw", "span", "topk", "attention_peak", "findings"} <= named
    code, out, err = qdebug(tmp_path, "attn", IMAGE, PROMPT, "--device", "cpu", "--max-new-tokens", "3", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    from qdebug.findings import Finding

    # the demo's own sample has no finding; a finding's JSON is Finding.to_json, whatever the command
    keys = _keys(doc) | set(Finding("layout", "error", "a message", stage="layer.2").to_json())
    assert named <= keys, named - keys
    assert set(doc["model"]) >= {"path", "architecture", "device", "dtype"}
    llama = tmp_path / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama"}))
    cases = [(["attn", tmp_path / "missing.png", PROMPT], 2, "image not found"),
             (["attn", IMAGE, PROMPT, "--model", tmp_path / "nowhere"], 3, "no such directory"),
             (["attn", IMAGE, PROMPT, "--model", llama], 3, "not a supported Qwen multimodal model")]
    import torch

    if not torch.cuda.is_available():
        cases.append((["attn", IMAGE, PROMPT, "--device", "cuda"], 4, "no CUDA device"))
    for args, expected, words in cases:
        code, _out, err = qdebug(tmp_path, *args)
        assert code == expected and words in err and len(err.strip().splitlines()) == 1, (args, code, err)


def test_the_exit_rule_every_page_gives():
    """index.md and attn.md: exit 1 when a check failed (an error finding), 0 when every finding is below an error."""
    from qdebug.commands.common import exit_status
    from qdebug.findings import Finding

    warning, error = Finding("first_divergence", "warning", "m"), Finding("layout", "error", "m")
    assert exit_status([]) == 0 and exit_status([warning]) == 0 and exit_status([warning, error]) == 1
    assert exit_status([warning], problem=True) == 1  # runs that part, a request not ok


def test_diff_json_and_png_are_what_its_page_says(tmp_path):
    """diff.md: the `--json` keys; the PNG on a log scale with the tolerance and the first divergence marked; exit 1."""
    from qdebug.render.png_text import read_text_boxes

    named = _named_keys("diff.md", "`--json PATH|-` writes", "Traces of different")
    assert {"stages", "first_divergence", "token_index", "kl", "topk_overlap", "findings"} <= named
    png = tmp_path / "d.png"
    code, out, err = qdebug(tmp_path, "diff", IMAGE, PROMPT, "--device", "cpu", "--max-new-tokens", "2", "--vary", "dtype",
                            "--json", "-", "--png", png)
    assert code == 1, err  # float32 vs bfloat16 part at encode
    doc = json.loads(out)
    assert named <= _keys(doc), named - _keys(doc)
    assert set(doc["first_divergence"]) >= {"stage", "token_index"} and doc["first_divergence"]["stage"] == "encode"
    texts = [" ".join(s.split()) for s, _ in read_text_boxes(png)[1]]
    assert any("10^{-" in t for t in texts), texts  # log-scale ticks
    assert f"rtol {2.0 ** -8:g}" in texts and "first divergence" in texts, texts  # bfloat16's tolerance line, the marker


def _capture(tmp_path: Path, n: int) -> Path:
    """The first `n` sample requests with their images beside them."""
    shutil.copytree(SAMPLE / "capture", tmp_path / "capture")
    rows = (SAMPLE / "capture.jsonl").read_text().splitlines()[:n]
    path = tmp_path / "burst.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_replay_json_has_every_key_its_page_names(tmp_path):
    """replay.md's `--json` row, from a runtime log and an injected capture replay; the fault's own events are in the
    JSON with origin "fault", labels only."""
    named = _named_keys("replay.md", "| `--json PATH\\|-` |", "| `--save PATH.qdr` |")
    assert {"observed_donor", "visual_offset", "images", "rows", "injected", "cells", "matrix", "tokens", "line"} <= named
    code, out, err = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--json", "-")
    assert code == 1, err
    log = json.loads(out)
    capture = _capture(tmp_path, 4)
    code, out, err = qdebug(tmp_path, "replay", capture, "--device", "cpu", "--inject", "shared-visual-buffer", "--seed", "0", "--json", "-")
    assert code == 1, err
    replayed = json.loads(out)
    assert named <= _keys(log) | _keys(replayed), named - _keys(log) - _keys(replayed)
    assert set(replayed["contamination"]) == {"ids", "matrix", "cells"} and replayed["contamination"]["matrix"]
    assert all({"index", "text_offset", "visual_offset", "rows", "donor"} <= set(i) for r in replayed["requests"] for i in r["images"])
    assert any(e.get("origin") == "fault" for e in replayed["events"])
    assert all(r[k] is None for r in log["requests"] for k in ("reference", "replayed"))  # re-execution fields: null for a log


@pytest.fixture(scope="module")
def clean_export(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    code, _out, err = qdebug(tmp, "export", "onnx", "--out", tmp / "demo")
    assert code == 0, err
    return tmp / "demo"


def test_a_clean_onnx_export_agrees_as_the_page_says(clean_export, tmp_path):
    """onnx.md: a clean export of the demo agrees at every stage on the sample images (max |diff| < 2e-5, cosine
    >= 0.999999), exit 0; its manifest is the page's example (but for the exporter's torch version)."""
    assert "on the sample images (max |diff| < 2e-5, cosine ≥ 0.999999)" in _page("onnx.md")
    images = sorted(SAMPLE.glob("*.png"))
    assert len(images) >= 6
    for image in images:
        code, out, err = qdebug(tmp_path, "diff", image, PROMPT, "--onnx", clean_export, "--json", "-")
        assert code == 0, (image.name, err)
        for stage in json.loads(out)["stages"]:
            assert stage["verdict"] == "ok" and stage["max_abs"] < 2e-5 and stage["cosine"] >= 0.999999, (image.name, stage)
    example = json.loads(re.search(r"```json\n(.*?)```", (DOCS / "commands" / "onnx.md").read_text(encoding="utf-8"), re.S).group(1))
    manifest = json.loads((clean_export / "qdebug-onnx.json").read_text())
    assert manifest["exporter"].startswith("torch.onnx.export(dynamo=True), torch ")
    example.pop("exporter"), manifest.pop("exporter")
    assert manifest == example


@pytest.fixture(scope="module")
def busy_log(tmp_path_factory):
    """A log_synth log of 3,000 lines: more requests than a small log's full tables, more events than 400."""
    from tests.logs.log_synth import generate_log

    path = tmp_path_factory.mktemp("log") / "svc.log"
    generate_log(path, 3000, seed=1)
    return path


def test_the_events_a_filter_selects_are_printed_the_first_400(busy_log, tmp_path):
    """runtime-logs.md: the events --since/--until/--request/--kind select are printed (the first 400; --jsonl for all)."""
    assert "select the events and findings shown, and the events they select are printed (the first 400; `--jsonl` for all)" in _page("runtime-logs.md")
    code, out, err = qdebug(tmp_path, "replay", busy_log, "--request", "1000", "--json", "-")
    events = json.loads(out)["events"]
    assert events and all("1000" in (e["request_id"], e["donor"]) for e in events)
    table = err.split("events shown (filter):", 1)[1]
    for e in events:  # each selected event is a row: its line, kind and request
        assert re.search(rf"│ {e['line']}\s+│.*│ {e['kind']}\s+│ {e['request_id']}\s+│", table), (e, table[:3000])
    events_file = tmp_path / "all.jsonl"
    code, out, err = qdebug(tmp_path, "replay", busy_log, "--since", "2000-01-01T00:00Z", "--jsonl", events_file)
    total = len(events_file.read_text().splitlines())
    assert total > 400
    flat = " ".join(out.split())
    assert f"first 400 of {total:,}; --jsonl for all of them" in flat, flat[-2000:]
    assert len(re.findall(r"^│ \d+\s+│ \d\d:\d\d:\d\d", out, re.M)) == 400


def test_an_index_is_recorded_with_the_machines_name_by_default(tmp_path):
    """runtime-logs.md: `--host`, default the machine's name, is recorded."""
    assert "(`--host`, default the machine's name, is recorded)" in _page("runtime-logs.md")
    code, _out, err = qdebug(tmp_path, "replay", "--index-only", SAMPLE / "burst.log", "--out", tmp_path / "index")
    assert code == 0, err
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["host"] == socket.gethostname()
    # the open data the page describes: the Parquet files, each with a `host` column; the manifest's kind codes
    import duckdb

    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == ["events-00000.parquet", "findings.parquet", "manifest.json", "requests.parquet"]
    for name in ("events-00000", "requests", "findings"):
        assert "host" in duckdb.sql(f"SELECT * FROM read_parquet('{tmp_path / 'index' / name}.parquet') LIMIT 0").columns, name
    assert "kind codes are the manifest's `kinds`: 2 an overwrite, 3 a sync" in _page("runtime-logs.md")
    assert manifest["kinds"][2] == "buffer_overwrite" and manifest["kinds"][3] == "stitch"  # the sync's event kind
    assert manifest["format"] == "qdebug-log-index" and manifest["files"] and manifest["total_lines"] == 52


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    server = Server([sys.executable, "-m", "qdebug", "serve", "--port", str(port), "--device", "cpu", "--traces", str(tmp / "traces")],
                    port, tmp / "serve.log", cwd=ROOT).wait_ready()
    yield server, tmp / "traces"
    server.stop()


def _body(**extra) -> dict:
    url = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode("ascii")
    return {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": PROMPT}]}],
            "max_tokens": 3, **extra}


def test_serve_answers_logprobs_from_the_trace_refuses_streams_and_indexes_each_request(served):
    """serve.md: `logprobs`/`top_logprobs` answered from the trace; `stream: true` refused (400); each trace in
    --traces DIR as 000001.qdt, ... with index.jsonl naming the server id, the client's X-Qdebug-Request tag and answer."""
    from qdebug.trace.schema import load_trace

    server, traces = served
    page = _page("serve.md")
    assert "`logprobs`/`top_logprobs` are answered from the trace; `stream: true`," in page
    refused = httpx.post(f"{server.url}/v1/chat/completions", json=_body(stream=True), timeout=120)
    assert refused.status_code == 400 and "stream" in refused.json()["error"]["message"], refused.text
    answer = httpx.post(f"{server.url}/v1/chat/completions", json=_body(logprobs=True, top_logprobs=3),
                        headers={"X-Qdebug-Request": "page-check"}, timeout=120)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert re.fullmatch(r"chatcmpl-qd-\w+-\d+", data["id"]), data["id"]
    index = [json.loads(line) for line in (traces / "index.jsonl").read_text().splitlines()]
    line = next(x for x in index if x["id"] == data["id"])
    assert line["client_request"] == "page-check" and line["answer"] == data["choices"][0]["message"]["content"]
    assert {"wave", "donors"} <= set(line) and re.fullmatch(r"\d{6}\.qdt", line["trace"])
    trace = load_trace(traces / line["trace"])
    content = data["choices"][0]["logprobs"]["content"]
    assert [c["token"] for c in content] == [s.token for s in trace.steps]
    for said, step in zip(content, trace.steps):
        assert len(said["top_logprobs"]) == 3
        assert said["logprob"] == pytest.approx(math.log(step.prob), abs=1e-6)
        assert [t["token"] for t in said["top_logprobs"]] == step.topk.tokens[:3]


def test_attn_puts_every_image_first_when_the_prompt_has_no_placeholder(tmp_path):
    """attn.md: put `<image>` in PROMPT where each image goes, or none to put all images first."""
    assert "Put `<image>` in PROMPT where each image goes, or none to put all images first" in _page("attn.md")
    other = SAMPLE / "blue_square_bottom_right.png"
    spans = {}
    for prompt in (PROMPT, "<image> and then <image>: describe."):
        code, out, err = qdebug(tmp_path, "attn", IMAGE, prompt, "--image", other, "--device", "cpu", "--max-new-tokens", "1", "--json", "-")
        assert code == 0, err
        doc = json.loads(out)
        assert [Path(i["path"]).name for i in doc["images"]] == [IMAGE.name, other.name]
        spans[prompt] = [i["span"] for i in doc["images"]]
        if prompt == PROMPT:
            assert doc["prompt"] == "<image><image>" + PROMPT
    first, placed = spans[PROMPT], spans["<image> and then <image>: describe."]
    assert first[1][0] - first[0][1] < placed[1][0] - placed[0][1]  # the text between the images moved them apart


def test_an_endpoint_that_redirects_is_not_followed(tmp_path):
    """replay.md: the API key is sent only to the endpoint (redirects are not followed): a server that redirects every
    request elsewhere never sees the other server reached, and the replay says what it got."""
    import os
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    assert "sent only to the endpoint (redirects are not followed)" in _page("replay.md")
    reached = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self):
            reached.append((self.path, self.headers.get("Authorization")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirecting(BaseHTTPRequestHandler):
        def _redirect(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_port}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _redirect

        def log_message(self, *args):
            pass

    redirecting = ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    for server in (elsewhere, redirecting):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    capture = _capture(tmp_path, 1)
    env = {**os.environ, "QDEBUG_TEST_KEY": "sk-page-check-3c1f", "QDEBUG_CACHE_DIR": str(tmp_path / "cache")}
    url = f"http://127.0.0.1:{redirecting.server_port}"
    try:
        asked = subprocess.run(["qdebug", "replay", str(capture), "--endpoint", url, "--api-key-env", "QDEBUG_TEST_KEY"],
                               capture_output=True, text=True, timeout=120, env=env)
        named = subprocess.run(["qdebug", "replay", str(capture), "--endpoint", url, "--api-key-env", "QDEBUG_TEST_KEY",
                                "--served-model", "m", "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120, env=env)
    finally:
        for server in (elsewhere, redirecting):
            server.shutdown()
    assert reached == []
    assert asked.returncode != 0 and asked.stderr.strip().splitlines() == [asked.stderr.strip()] and "HTTP 307" in asked.stderr, asked.stderr
    assert named.returncode == 1, named.stderr
    (request,) = json.loads((tmp_path / "r.json").read_text())["requests"]
    assert request["verdict"] == "error" and "HTTP 307" in request["error"], request
    assert "sk-page-check-3c1f" not in asked.stderr + asked.stdout + named.stderr + named.stdout


def test_a_request_alone_on_the_buggy_server_is_not_contaminated(tmp_path):
    """serve.md: with `--inject shared-visual-buffer` a request alone cannot be contaminated."""
    assert "a request alone cannot be contaminated" in _page("serve.md")
    port = free_port()
    server = Server([sys.executable, "-m", "qdebug", "serve", "--port", str(port), "--device", "cpu", "--inject", "shared-visual-buffer",
                     "--seed", "1", "--traces", str(tmp_path / "traces")], port, tmp_path / "serve.log", cwd=ROOT).wait_ready()
    try:
        answers = [httpx.post(f"{server.url}/v1/chat/completions", json=_body(max_tokens=8), timeout=120) for _ in range(3)]
    finally:
        server.stop()
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    index = [json.loads(line) for line in (tmp_path / "traces" / "index.jsonl").read_text().splitlines()]
    assert len(index) == 3 and all(line["donors"] == [] and line["inject"] == "shared-visual-buffer" for line in index), index
    assert {a.json()["choices"][0]["message"]["content"] for a in answers} == {"a red circle in the top left"}


def test_export_presets_are_repeatable(tmp_path):
    """onnx.md: fault presets (`--inject`, repeatable): both land in one export, and the diff parts at the earlier
    stage either one moves (mrope-text-only's sync, before transpose-weight's layer.2)."""
    assert "Fault presets show what it catches (`--inject`, repeatable)" in _page("onnx.md")
    out = tmp_path / "both"
    code, _out, err = qdebug(tmp_path, "export", "onnx", "--out", out, "--inject", "transpose-weight:layer.2.mlp", "--inject", "mrope-text-only")
    assert code == 0, err
    injected = json.loads((out / "qdebug-onnx.json").read_text())["injected"]
    assert len(injected) == 2 and any("transpose-weight" in str(i) for i in injected) and any("mrope-text-only" in str(i) for i in injected), injected
    code, out_json, err = qdebug(tmp_path, "diff", IMAGE, PROMPT, "--onnx", out, "--json", "-")
    assert code == 1, err
    assert json.loads(out_json)["first_divergence"]["stage"] == "sync"


def test_exit_zero_keeps_bad_input_at_2(tmp_path):
    """replay.md: `--exit-zero` keeps the reports and exits 0; bad input is still 2."""
    assert "`--exit-zero` keeps the reports and exits 0; bad input is still 2" in _page("replay.md")
    code, _out, err = qdebug(tmp_path, "replay", tmp_path / "missing.log", "--exit-zero")
    assert code == 2 and "replay input not found" in err, err
    code, _out, err = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--exit-zero")
    assert code == 0, err  # the sample log's contamination, reported only


def test_diff_vary_dtype_takes_the_pairs_dtypes_and_the_less_precise_ones_tolerance(tmp_path):
    """diff.md: `--vary dtype` is float32 vs bfloat16 (or --a-dtype/--b-dtype); the tolerance is the less precise dtype's."""
    assert "--vary dtype # float32 vs bfloat16 (or --a-dtype/--b-dtype)" in _page("diff.md")
    code, out, err = qdebug(tmp_path, "diff", IMAGE, PROMPT, "--device", "cpu", "--max-new-tokens", "1", "--vary", "dtype",
                            "--a-dtype", "float32", "--b-dtype", "float16", "--json", "-")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert (doc["a"]["label"], doc["b"]["label"]) == ("A float32", "B float16")
    assert doc["tolerance"] == {"atol": 1e-4, "rtol": 2.0 ** -11}


@pytest.mark.parametrize("args, command", [(["export", "onnx", "--device", "cpu"], "export onnx"), (["attn", "--bogus"], "attn"),
                                           (["demo", "train", "--bogus"], "demo train")])
def test_a_usage_error_names_the_help_of_the_command_it_came_from(tmp_path, args, command):
    """index.md: errors are one line on stderr (`qdebug: error: …`); a usage error points at the whole subcommand's
    --help (`qdebug export onnx --help`, not `qdebug onnx --help`, a command that does not exist)."""
    code, _out, err = qdebug(tmp_path, *args)
    assert code == 2 and err.strip().splitlines() == [err.strip()] and err.startswith("qdebug: error: "), err
    assert err.strip().endswith(f"(see `qdebug {command} --help`)"), err


def test_log_filters_read_times_as_utc_unless_zoned_and_every_kind_the_page_names(tmp_path):
    """runtime-logs.md: `--since/--until` (ISO time, UTC unless a zone is given); `--kind overwrite|desync|shape|oob`."""
    page = _page("runtime-logs.md")
    assert "`--since/--until` (ISO time, UTC unless a zone is given)" in page
    said = re.search(r"`--kind ([a-z|]+)`", page).group(1).split("|")
    assert said == ["overwrite", "desync", "shape", "oob"], said

    def events(*args) -> list[dict]:
        code, out, err = qdebug(tmp_path, "replay", SAMPLE / "burst.log", "--json", "-", *args)
        assert code in (0, 1), err
        return json.loads(out)["events"]

    every = events()
    shown = [events("--since", when) for when in ("2024-07-12T14:23:07.200", "2024-07-12T14:23:07.200Z", "2024-07-12T16:23:07.200+02:00")]
    assert 0 < len(shown[0]) < len(every) and shown[0] == shown[1] == shown[2]
    kinds = {"overwrite": "buffer_overwrite", "desync": "desync", "shape": "shape_mismatch", "oob": "index_out_of_bounds"}
    for kind in said:
        selected = events("--kind", kind)
        assert selected and {e["kind"] for e in selected} == {kinds[kind]}, (kind, selected)
