"""Generated runtime logs with known truth, written once per session into tmp."""

from __future__ import annotations

import pytest

from qdebug.replay.formats import log_columns
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


@pytest.fixture(params=["native", "re2"])
def recogniser(request):
    """Each test runs with the native pass and with the RE2 passes alone."""
    native = request.param == "native"
    assert not native or log_columns.native_built(), "the native pass is not built: run `pip install -e .`"
    before = log_columns.use_native(native)
    yield request.param
    log_columns.use_native(before)
