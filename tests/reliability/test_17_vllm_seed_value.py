"""Issue 35 item 16's rule inside the engine: QDEBUG_VLLM_SEED that is not a whole number (`²`, `1.5`, `-1`) is said
in the server's log, naming the variable, and nothing is injected; it never raises inside vLLM (int('²') did)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from qdebug.engine import vllm_faults


@pytest.mark.parametrize("value", ["²", "1.5", "-1", "seven"])
def test_a_bad_seed_is_logged_and_nothing_is_injected(monkeypatch, caplog, value):
    monkeypatch.setenv(vllm_faults.ENV_SEED, value)
    model = SimpleNamespace()  # a shared buffer installed on it would set attributes / hooks: none may appear
    with caplog.at_level(logging.ERROR, logger="vllm.qdebug"):
        vllm_faults.install(SimpleNamespace(model=model), "shared-visual-buffer")
    assert vars(model) == {}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "QDEBUG_VLLM_SEED" in errors[0] and "nothing injected" in errors[0], errors
