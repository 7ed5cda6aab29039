"""Every command line in the documentation's code blocks (README.md and the docs/ site) is run here as written (placeholders filled with the sample data, out/
with a temporary folder, the server's port with a free one), or listed with what it needs that a test machine lacks."""

from __future__ import annotations

import gzip
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qdebug.cli import app
from tests.docs_text import documentation_text
from tests.servers import Server, free_port

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.S)
INVOCATION = re.compile(r"(?:^|&& )(qdebug\s.*)$")

# What a test machine lacks, by the command lines that need it (matched by a substring of the line).
NEEDS = {
    "a checkpoint in /models (or the HF cache)": ["/models/", "--model ...", "Qwen/Qwen2-VL-2B-Instruct", "QWEN3_VL_DIR"],
    "a remote OpenAI-style endpoint and its key": ["https://llm.internal/v1"],
    "a vLLM server with qdebug's plugin (tests/engine/ run it where scripts/vllm-env built one)": ["--engine ", "--engine-traces", "vllm-trace.qdt"],
    "a terminal (the TUI; tests/tui/ drive it headless through build_app)": ["qdebug repl "],
}
# What each README line must do: its exit code (README, "Exit codes": 0 nothing found, 1 a problem found) and a phrase of
# its output, keyed by the line itself or a substring of it (each runnable line has exactly one).
EXPECT = {
    "--png out/heatmap.png": (0, "all checks passed"),  # the demo model on its own sample: nothing to find
    "replay sample_data/burst.log": (1, "request 42's visual buffer at offset 256 was overwritten by request 43"),  # the log's lines 11-14
    # the capture's `observed` answers are production's contamination, reported but never this run's failure
    "qdebug replay sample_data/capture.jsonl": (0, "observed_contamination: request req-05: production returned"),
    "--inject shared-visual-buffer --seed 0": (1, "received request req-09's visual rows"),
    "svc.log.2.gz svc.log.1.gz svc.log": (1, "visual buffer at offset"),  # log_synth plants overwrites in every log
    "svc.log --request 42": (0, "events shown (filter): 0"),  # log_synth's request ids start at 1000
    "--kind overwrite --since": (1, "buffer_overwrite"),
    "--out /tmp/fleet/a --host a": (0, "of host a into"),
    "--out index/gpu-3 --host gpu-3": (0, "indexed 1 watch findings into"),  # docs/watch.md: the log _Place.findings writes
    "--out /tmp/fleet/b --host b": (0, "of host b into"),
    "/tmp/fleet/a /tmp/fleet/b --kind overwrite": (1, "request b/"),  # both hosts' rows, named by host
    "--vary paths --order both": (0, "no stage beyond tolerance"),
    "--vary dtype": (1, "first divergence: encode"),  # bfloat16 vs float32: encode is the first stage computed
    "--vary attn": (0, "no stage beyond tolerance"),  # sdpa and eager agree on the demo within tolerance
    "IMAGE PROMPT --inject mrope-text-only": (1, "first divergence: sync"),  # sync holds the position ids the fault flattens
    "IMAGE PROMPT --inject head-first:2": (1, "first divergence: layer.2"),
    "diff before.qdt after.qdt": (0, "no stage beyond tolerance"),  # one request traced with sdpa, then eager
    "export onnx --out /tmp/t2": (0, "qdebug-onnx.json"),
    "--onnx /tmp/t2": (1, "export_layer: layer.2 is the first stage the export computes differently"),
    "export onnx --out /tmp/m": (0, "qdebug-onnx.json"),
    "--onnx /tmp/m": (1, "position_ids: position ids the decoder received differ"),
}

def readme_commands() -> list[str]:
    """Every qdebug command line in the README's code blocks, as written (comments and `pip install … &&` dropped)."""
    lines = []
    for block in BLOCK.findall(documentation_text()):
        for line in block.splitlines():
            found = INVOCATION.search(line.split(" # ")[0].split("  #")[0].strip())
            if found:
                lines.append(found.group(1).strip())
    return lines


def _expected(line: str) -> tuple[int, str]:
    """The exit code and phrase EXPECT gives this line: the entry for the whole line, else its one substring entry."""
    if line in EXPECT:
        return EXPECT[line]
    keys = [key for key in EXPECT if key in line and not key.startswith("qdebug ")]  # whole-line keys match only whole
    assert len(keys) == 1, (line, keys)
    return EXPECT[keys[0]]


def _needs(line: str) -> str | None:
    return next((why for why, marks in NEEDS.items() if any(m in line for m in marks)), None)


RUNNABLE = [line for line in readme_commands() if _needs(line) is None]


def test_every_readme_command_is_run_or_says_what_it_needs():
    lines = readme_commands()
    assert len(lines) >= 30, lines  # the extraction found the README's commands
    needing = [line for line in lines if _needs(line) is not None]
    assert RUNNABLE and needing
    unused = [m for marks in NEEDS.values() for m in marks if not any(m in line for line in lines)]
    assert not unused, f"NEEDS marks no README line carries any more: {unused}"
    local = [line for line in RUNNABLE if line in LOCAL]
    assert all(_expected(line) for line in local)  # each local line has one expectation
    assert all(any(key in line for line in local) for key in EXPECT)  # and each expectation a line


class _Place:
    """A temporary folder with what the README's placeholders stand for."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        (tmp / "out").mkdir()
        self.port: int | None = None

    def logs(self) -> None:
        from tests.logs.log_synth import generate_log

        if not (self.tmp / "svc.log").exists():
            for name, seed in (("svc.log", 1), ("svc.log.1", 2), ("svc.log.2", 3)):
                generate_log(self.tmp / name, 600, seed=seed)
            for name in ("svc.log.1", "svc.log.2"):
                with open(self.tmp / name, "rb") as src, gzip.open(self.tmp / f"{name}.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)

    def findings(self) -> None:
        """A watch findings log for host gpu-3, written through the watch's own writer (one placement violation)."""
        from qdebug.engine.watch_log import FindingsLog, WatchFinding

        folder = self.tmp / "gpu-3"
        if not (folder / "findings.log").exists():
            folder.mkdir()
            writer = FindingsLog(str(folder), 1 << 20)
            writer.host = "gpu-3"
            writer.add(WatchFinding("placement", "violation", "sync", "chatcmpl-a", "item 0 (image): 24 of 24 rows are chatcmpl-d1's",
                                    donors=["chatcmpl-d1"]))
            writer.drain()

    def fill(self, line: str) -> list[str]:
        tmp = str(self.tmp)
        line = line.replace("IMAGE PROMPT", 'sample_data/red_circle_top_left.png "Describe the image."')
        line = re.sub(r"/tmp/(\w+)", lambda m: f"{tmp}/{m.group(1)}", line)  # first: tmp itself is under /tmp
        line = re.sub(r"(?<![\w/])(gpu-3/findings\.log|index/gpu-3)", lambda m: f"{tmp}/{m.group(1)}", line)
        line = re.sub(r"(?<![\w/])out/", f"{tmp}/out/", line)
        line = re.sub(r"(?<![\w/])(svc\.log[\w.]*|before\.qdt|after\.qdt)", lambda m: f"{tmp}/{m.group(1)}", line)
        line = re.sub(r"(?<![\w/])capture\.jsonl", "sample_data/capture.jsonl", line)
        line = line.replace("sample_data/sample_data/", "sample_data/")
        if self.port is not None:
            line = line.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{self.port}")
        return shlex.split(line)[1:]  # without `qdebug`


def _flat(text: str) -> str:
    """The output's words, without Rich's boxes and line wraps (a phrase may wrap at any width)."""
    return " ".join(re.sub(r"[│┃╭╮╰╯─━┏┓┗┛┡┩┌┐└┘]", " ", text).split())


def _invoke(args: list[str], code: int = 0, phrase: str | None = None):
    """`qdebug ARGS` through Typer, held to its exit code and a phrase of its output."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code, f"qdebug {shlex.join(args)} → {result.exit_code}, expected {code}\n{result.output[-3000:]}"
    assert phrase is None or phrase in _flat(result.output), f"qdebug {shlex.join(args)}: no {phrase!r} in\n{result.output[-3000:]}"
    return result


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """One folder for the whole module: the ONNX exports and saved traces are made once."""
    return _Place(tmp_path_factory.mktemp("readme"))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the README's sample_data/ paths are relative to the repository
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))


LOCAL = [line for line in RUNNABLE if not line.startswith("qdebug serve") and "--endpoint" not in line]
SERVED = [line for line in RUNNABLE if line not in LOCAL]


@pytest.mark.parametrize("line", LOCAL)
def test_readme_command_runs(line, place):
    if "svc.log" in line:
        place.logs()
    if "findings.log" in line:
        place.findings()
    if "before.qdt" in line:
        for name, kernel in (("before", "sdpa"), ("after", "eager")):  # one request, traced twice
            _invoke(["attn", "sample_data/red_circle_top_left.png", "Describe the image.", "--max-new-tokens", "3", "--attn", kernel,
                     "--save", str(place.tmp / f"{name}.qdt")])
    if "/tmp/fleet/" in line and "--index-only" not in line:  # the hosts' indexes the lines before it write
        for index_only in (x for x in LOCAL if "--index-only" in x and "/tmp/fleet/" in x):
            _invoke(place.fill(index_only))
    if "--onnx " in line:  # the export the line before it in the README writes
        out = re.search(r"--onnx (\S+)", line).group(1)
        export = next(x for x in RUNNABLE if x.startswith("qdebug export onnx") and f"--out {out} " in x)
        if not (place.tmp / Path(out).name).exists():
            _invoke(place.fill(export))
    _invoke(place.fill(line), *_expected(line))


def test_readme_serve_and_endpoint_commands_run(place):
    """`qdebug serve` as the README starts it: clean, every endpoint replay of the README is all `ok` (exit 0); with the
    incident's bug, the replay the README runs against it exits 1 with contaminated requests, and every request not `ok`
    is one the server's own record says read another request's rows (no false alarm)."""
    import json

    serves = [line for line in SERVED if line.startswith("qdebug serve")]
    replays = [line for line in SERVED if "--endpoint" in line]
    assert len(serves) == 2 and "--inject" not in serves[0] and "--inject shared-visual-buffer" in serves[1] and replays
    against_bug = replays[-1]  # the README's line right after `serve --inject`
    assert documentation_text().index(serves[1]) < documentation_text().index(against_bug)
    for serve in serves:
        place.port = free_port()
        args = [a if a != "8000" else str(place.port) for a in place.fill(serve)]
        if "--port" not in args:
            args += ["--port", str(place.port)]
        server = Server([sys.executable, "-m", "qdebug", *args], place.port, place.tmp / "serve.log", cwd=ROOT).wait_ready()
        try:
            for k, replay in enumerate(replays if serve == serves[0] else [against_bug]):
                out = place.tmp / f"served-{serves.index(serve)}-{k}.json"
                argv = [a if a != "5" else "2" for a in place.fill(replay)]  # --repeat 5 → 2: the same, shorter
                if "--json" not in argv:
                    argv += ["--json", str(out)]
                else:
                    out = Path(argv[argv.index("--json") + 1])
                buggy = serve == serves[1]
                _invoke(argv, 1 if buggy else 0)
                requests = json.loads(out.read_text())["requests"]
                assert len(requests) == len((ROOT / "sample_data" / "capture.jsonl").read_text().splitlines())
                verdicts = {r["id"]: r["verdict"] for r in requests}
                if not buggy:
                    assert set(verdicts.values()) == {"ok"}, verdicts
                    continue
                served = {line["client_request"]: line for line in map(json.loads, (place.tmp / "out" / "buggy" / "index.jsonl").read_text().splitlines())}
                flagged = {rid for rid, v in verdicts.items() if v != "ok"}
                # mixed rows can read like no one's answer (diverged); nothing else is possible against this server
                assert "contaminated" in verdicts.values() and set(verdicts.values()) <= {"ok", "contaminated", "diverged"}, verdicts
                assert all(served[f"{rid}/burst-1"]["donors"] for rid in flagged), (verdicts, served)
        finally:
            server.stop()
