"""Generated runtime logs with known truth, written once per session into tmp."""

from __future__ import annotations

import pytest

from tests.logs.log_synth import generate_log

BIG_LINES = 2_000_000


@pytest.fixture(scope="session")
def big_log(tmp_path_factory):
    """A 2 M-line log in the incident's format and its truth."""
    path = tmp_path_factory.mktemp("biglog") / "svc.log"
    return path, generate_log(path, BIG_LINES, seed=14)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh index cache for one test."""
    monkeypatch.setenv("QDEBUG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"
