"""Replays of the sample capture, run once per session."""

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _replay(demo, **settings):
    from qdebug.analysis.replay import report_from_replay
    from qdebug.replay.engine import ReplaySettings, replay
    from qdebug.replay.formats.capture import parse_capture

    batch = parse_capture(SAMPLE / "capture.jsonl")
    return report_from_replay(batch, replay(demo, batch, ReplaySettings(**settings)))


@pytest.fixture(scope="session")
def clean_threads(demo):
    return _replay(demo, mode="threads", concurrency=4)


@pytest.fixture(scope="session")
def clean_batched(demo):
    return _replay(demo, mode="batched")


@pytest.fixture(scope="session")
def faulty(demo):
    return _replay(demo, mode="threads", concurrency=4, inject="shared-visual-buffer", seed=0)


@pytest.fixture
def replay_with(demo):
    return lambda **settings: _replay(demo, **settings)
