"""Every command line in README.md's code blocks is run here as written (placeholders filled with the sample data, out/
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
from tests.servers import Server, free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.S)
INVOCATION = re.compile(r"(?:^|&& )(qdebug\s.*)$")

# What a test machine lacks, by the command lines that need it (matched by a substring of the line).
NEEDS = {
    "a checkpoint in /models (or the HF cache)": ["/models/", "--model ...", "Qwen/Qwen2-VL-2B-Instruct", "QWEN3_VL_DIR"],
    "a remote OpenAI-style endpoint and its key": ["https://llm.internal/v1"],
    "a vLLM server with qdebug's plugin (tests/engine/ run it where scripts/vllm-env built one)": ["--engine ", "--engine-traces", "vllm-trace.qdt"],
    "a terminal (the TUI; tests/tui/ drive it headless through build_app)": ["qdebug repl "],
}
# What a README line's comment promises, checked in its output.
PROMISES = {
    "--onnx /tmp/t2": "layer.2",
    "--onnx /tmp/m": "sync",
}


def readme_commands() -> list[str]:
    """Every qdebug command line in the README's code blocks, as written (comments and `pip install … &&` dropped)."""
    lines = []
    for block in BLOCK.findall(README.read_text(encoding="utf-8")):
        for line in block.splitlines():
            found = INVOCATION.search(line.split(" # ")[0].split("  #")[0].strip())
            if found:
                lines.append(found.group(1).strip())
    return lines


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
    assert all(any(key in line for line in RUNNABLE) for key in PROMISES)  # each promise is checked on a line that runs


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

    def fill(self, line: str) -> list[str]:
        tmp = str(self.tmp)
        line = line.replace("IMAGE PROMPT", 'sample_data/red_circle_top_left.png "Describe the image."')
        line = re.sub(r"(?<![\w/])out/", f"{tmp}/out/", line)
        line = re.sub(r"/tmp/(\w+)", lambda m: f"{tmp}/{m.group(1)}", line)
        line = re.sub(r"(?<![\w/])(svc\.log[\w.]*|before\.qdt|after\.qdt)", lambda m: f"{tmp}/{m.group(1)}", line)
        line = re.sub(r"(?<![\w/])capture\.jsonl", "sample_data/capture.jsonl", line)
        line = line.replace("sample_data/sample_data/", "sample_data/")
        if self.port is not None:
            line = line.replace("http://127.0.0.1:8000", f"http://127.0.0.1:{self.port}")
        return shlex.split(line)[1:]  # without `qdebug`


def _invoke(args: list[str]):
    result = CliRunner().invoke(app, args)
    assert result.exit_code in (0, 1), f"qdebug {shlex.join(args)} → {result.exit_code}\n{result.output[-3000:]}"
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
    result = _invoke(place.fill(line))
    for key, promise in PROMISES.items():
        if key in line:
            assert promise in result.output, result.output[-2000:]


def test_readme_serve_and_endpoint_commands_run(place):
    """`qdebug serve` as the README starts it (clean, then with the bug), and the endpoint replays against it."""
    serves = [line for line in SERVED if line.startswith("qdebug serve")]
    replays = [line for line in SERVED if "--endpoint" in line]
    assert serves and replays
    for serve in serves:
        place.port = free_port()
        args = [a if a != "8000" else str(place.port) for a in place.fill(serve)]
        if "--port" not in args:
            args += ["--port", str(place.port)]
        server = Server([sys.executable, "-m", "qdebug", *args], place.port, place.tmp / "serve.log", cwd=ROOT).wait_ready()
        try:
            if serve == serves[0]:
                for replay in replays:
                    _invoke([a if a != "5" else "2" for a in place.fill(replay)])  # --repeat 5 → 2: the same, shorter
        finally:
            server.stop()
