"""Tiny random checkpoints of each family, built once per session from the demo tokenizer."""

from __future__ import annotations

import pytest

from .build import build_qwen2_audio, tone


@pytest.fixture(scope="session")
def qwen2_audio_dir(tmp_path_factory):
    """A tiny random Qwen2-Audio checkpoint directory."""
    return build_qwen2_audio(tmp_path_factory.mktemp("qwen2_audio"))


@pytest.fixture(scope="session")
def qwen2_audio(qwen2_audio_dir):
    """That checkpoint loaded with qdebug's kernel (float32, CPU)."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()
    return load_model(str(qwen2_audio_dir), "cpu", "float32")


@pytest.fixture(scope="session")
def clip_wav(tmp_path_factory):
    """A 1 s 440 Hz tone at 22.05 kHz (louder second half), as WAV."""
    return tone(tmp_path_factory.mktemp("clips") / "tone.wav")


_built: dict = {}
_loaded: dict = {}


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory):
    """family name → its tiny random checkpoint directory (each built once per session)."""
    from .build import BUILDERS

    def get(name: str):
        if name not in _built:
            _built[name] = BUILDERS[name](tmp_path_factory.mktemp(name))
        return _built[name]

    return get


@pytest.fixture(scope="session")
def family_model(family_dir):
    """family name → that checkpoint loaded with qdebug's kernel (float32, CPU), once per session."""
    from qdebug.commands.common import quiet_transformers
    from qdebug.model.load import load_model

    quiet_transformers()

    def get(name: str):
        if name not in _loaded:
            _loaded[name] = load_model(str(family_dir(name)), "cpu", "float32")
        return _loaded[name]

    return get
