"""Shared fixtures: the demo model (loaded once), scene images on disk, a traced request."""

from __future__ import annotations

import os
import random
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _hypothesis_profile() -> None:
    """Under CI the fuzz tests draw the same examples every run (a red CI names a regression, not a lucky draw;
    nothing is written to .hypothesis); elsewhere they draw new ones, which is how they find bugs."""
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


_hypothesis_profile()


@pytest.fixture(scope="session")
def demo():
    """The shipped demo model, loaded once with qdebug's eager kernel on CPU."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()
    return load_model("demo", "cpu", "float32", "eager")


@pytest.fixture(scope="session")
def plain_demo():
    """The demo model loaded with transformers' plain eager attention (no qdebug kernel): the reference."""
    from qdebug.model.load import load_model

    return load_model("demo", "cpu", "float32", attn_implementation="eager")


def scene(seed: int, **kw):
    """A procedural scene from a fixed seed."""
    from qdebug.demo.scenes import make_scene

    return make_scene(random.Random(seed), **kw)


@pytest.fixture
def scene_png(tmp_path):
    """A 168×112 scene saved as PNG, and its Scene."""
    s = scene(3, width=168, height=112, colour="green", shape="triangle", quadrant="top right")
    path = tmp_path / "scene.png"
    s.image.save(path)
    return path, s


@pytest.fixture(scope="session")
def demo_trace(demo):
    """A trace of one scene request on the demo model."""
    from qdebug.trace.request import build_request
    from qdebug.trace.runner import trace_request

    s = scene(11, width=140, height=196, colour="red", shape="circle", quadrant="bottom left")
    return trace_request(demo, build_request("Describe the image.", [], images=[s.image], max_new_tokens=12)), s


# Runtime-log indexes of the tests go to a throwaway cache, never the user's ~/.cache (subprocesses inherit it).
os.environ.setdefault("QDEBUG_CACHE_DIR", tempfile.mkdtemp(prefix="qdebug-test-cache-"))
