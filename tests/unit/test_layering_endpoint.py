"""The endpoint client, its analysis and the offset measurements stay below render; serve pulls in no UI library."""

from tests.imports import UI_LIBRARIES, forbidden_imports

MODULES = ["qdebug.replay.endpoint", "qdebug.analysis.endpoint", "qdebug.analysis.offsets", "qdebug.serve.app", "qdebug.replay.wave_gate"]


def test_endpoint_and_serve_import_no_ui_libraries():
    assert not forbidden_imports(MODULES, roots=UI_LIBRARIES, prefixes=("qdebug.render", "qdebug.tui"))
