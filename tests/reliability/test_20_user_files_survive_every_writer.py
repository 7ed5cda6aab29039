"""Issue 35, must hold: no command removes or rewrites a user's file it was not given as an output. Each command that
writes into a folder runs against a folder of user files named as qdebug's own files are (manifest.json, events-0.parquet,
index.jsonl, 000001.qdt, prefill.onnx, config.json, ...), and afterwards every one of them holds the same bytes and mode.
The command may refuse the folder (one line, exit 2) or write beside the files; it may not touch them.
(scripts/vllm-env and scripts/lowest-env are walked the same way in test_17_vllm_env_deletes_only_its_own.py and
tests/compat, with a failing python so that nothing is built.)"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.servers import Server, free_port

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / "sample_data" / "red_circle_top_left.png"
LOOKALIKES = ["manifest.json", "events-00000.parquet", "requests.parquet", "findings.parquet", "index.jsonl",
              "000001.qdt", "trace.qdt", "report.qdr", "prefill.onnx", "vision.onnx", "qdebug-onnx.json", "config.json",
              "model.safetensors", "timeline.png", "heatmap.png", "out.json", ".qdebug-stamp"]


def _user_folder(folder: Path) -> dict[str, tuple[bytes, int]]:
    """`folder` filled with user files under qdebug-like names; what each holds and its mode."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(LOOKALIKES):
        (folder / name).write_bytes(f"user data {k}: {name}\n".encode())
        (folder / name).chmod(0o640 if k % 2 else 0o600)
    return _state(folder)


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {name: ((folder / name).read_bytes(), stat.S_IMODE((folder / name).stat().st_mode))
            for name in LOOKALIKES if (folder / name).exists()}


def _qdebug(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "qdebug")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO)


@pytest.fixture(autouse=True)
def _this_tree(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))


def _refused_or_ok(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr


FOLDER_COMMANDS = {
    "replay --index-only --out": lambda d: ("replay", "--index-only", "sample_data/burst.log", "--out", d),
    "export onnx --out": lambda d: ("export", "onnx", "--out", d),
    "demo train --out": lambda d: ("demo", "train", "--out", d, "--steps", "1"),
}


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_a_folder_command_leaves_every_user_file_as_it_was(tmp_path, command):
    folder = tmp_path / "mine"
    before = _user_folder(folder)
    proc = _qdebug(*FOLDER_COMMANDS[command](folder))
    _refused_or_ok(proc)
    assert _state(folder) == before


def test_named_outputs_are_written_beside_the_user_files_and_nothing_else_changes(tmp_path):
    folder = tmp_path / "mine"
    before = _user_folder(folder)
    outs = {"--json": folder / "new.json", "--save": folder / "new.qdt", "--png": folder / "new.png"}
    proc = _qdebug("attn", IMAGE, "Describe the image.", "--max-new-tokens", "3", *[x for kv in outs.items() for x in kv])
    assert proc.returncode == 0, proc.stderr
    assert all(path.is_file() for path in outs.values())
    replay = _qdebug("replay", "sample_data/burst.log", "--exit-zero", "--json", folder / "r.json",
                     "--timeline-png", folder / "t.png", "--emit-log", folder / "e.log")
    assert replay.returncode == 0, replay.stderr
    assert _state(folder) == before
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != ".qdebug-stamp"]  # no temporaries


def test_serve_writes_its_traces_beside_a_users_files(tmp_path):
    folder = tmp_path / "mine"
    before = _user_folder(folder)
    port = free_port()
    server = Server([sys.executable, "-m", "qdebug", "serve", "--port", str(port), "--device", "cpu", "--traces", str(folder)],
                    port, tmp_path / "serve.log", cwd=REPO).wait_ready()
    try:
        url = "data:image/png;base64," + base64.b64encode(IMAGE.read_bytes()).decode("ascii")
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                           {"type": "text", "text": "Describe the image."}]}],
                "max_tokens": 3, "temperature": 0}
        answer = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
    finally:
        server.stop()
    after = _state(folder)
    # index.jsonl is the server's own index: a user's file of that name is appended to, never rewritten
    assert after.pop("index.jsonl")[0].startswith(before.pop("index.jsonl")[0])
    assert after == before
    assert len(list(folder.glob("*.qdt"))) == 3  # the user's two and the server's new one, next to them
