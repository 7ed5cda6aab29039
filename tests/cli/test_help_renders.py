"""`--help` renders for every command and subcommand of the installed `qdebug` (help text is Rich markup: a stray `[/x]` kills it)."""

from __future__ import annotations

import os
import subprocess

import pytest
import typer

from qdebug.cli import app


def _command_paths(command, path=()):
    """Every command path under the Typer app: (), ("attn",), ("demo", "train"), ..."""
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _command_paths(sub, (*path, name))


PATHS = list(_command_paths(typer.main.get_command(app)))


def test_the_walk_finds_the_commands_users_know():
    names = {" ".join(p) for p in PATHS}
    assert {"attn", "replay", "diff", "repl", "estimate", "serve", "demo train", "demo eval", "export onnx"} <= names


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "qdebug")
def test_help_renders(path):
    result = subprocess.run(["qdebug", *path, "--help"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "100"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "Usage" in result.stdout
    if path:  # the command's own help, not the group's
        assert f"qdebug {' '.join(path)}" in result.stdout
