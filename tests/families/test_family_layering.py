"""The family modules keep the one-way imports: trace records evidence, analysis judges it, no UI below render."""

from tests.imports import UI_LIBRARIES, forbidden_imports

MODULES = [
    "qdebug.model.adapters.qwen3_5", "qdebug.model.adapters.qwen2_audio", "qdebug.model.linear_attention",
    "qdebug.trace.audio", "qdebug.trace.stages.audio", "qdebug.trace.linear_record", "qdebug.trace.deepstack_record",
    "qdebug.trace.family_record",
]


def test_family_modules_import_no_upper_layers():
    assert not forbidden_imports(MODULES, roots=UI_LIBRARIES, prefixes=("qdebug.replay", "qdebug.analysis", "qdebug.render", "qdebug.tui"))
