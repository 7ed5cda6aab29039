"""A model spec resolves to its facts once per command: qdebug reads the demo's config.json once on a real `attn` run."""

import sys
import traceback

from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.model import load

_opens: list[list[str]] | None = None


def _hook(event: str, args: tuple) -> None:
    """Record the stack of each open of a config.json while a count is running (audit hooks cannot be removed)."""
    if _opens is None or event != "open" or not isinstance(args[0], str) or not args[0].endswith("config.json"):
        return
    if args[0].rsplit("/", 1)[-1] != "config.json":
        return
    _opens.append([f.filename for f in traceback.extract_stack()])


def test_attn_reads_config_json_once(scene_png, tmp_path, monkeypatch):
    global _opens
    path, _ = scene_png
    # a cold command: earlier in-process commands of the suite (test_attn_cli) leave the demo's config cached
    monkeypatch.setattr(load, "_CONFIGS", {})
    sys.addaudithook(_hook)
    _opens = []
    try:
        result = CliRunner().invoke(app, ["attn", str(path), "Describe the image.", "--json", str(tmp_path / "a.json"), "--device", "cpu"])
    finally:
        opens, _opens = _opens, None
    assert result.exit_code == 0, result.output
    # transformers' own loaders (the model, the processor, the meta-device size estimate) read it too: not qdebug's
    ours = [stack for stack in opens if not any("/transformers/" in f for f in stack)]
    assert opens, "no config.json open was seen at all: the count is blind"
    assert len(ours) == 1, f"qdebug read config.json {len(ours)} times on one attn request (expected once)"
