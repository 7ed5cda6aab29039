"""Imports flow one way: nothing below render pulls in rich, textual or matplotlib; `--help` stays light."""

import subprocess
import sys

BELOW_RENDER = [
    "qdebug.model.load", "qdebug.model.attention", "qdebug.trace.runner", "qdebug.trace.estimate", "qdebug.trace.policy", "qdebug.trace.stepper", "qdebug.trace.schema",
    "qdebug.replay.engine", "qdebug.replay.formats.detect", "qdebug.replay.report",
    "qdebug.analysis.diff", "qdebug.analysis.replay", "qdebug.analysis.attention", "qdebug.analysis.detectors.layout",
]


def test_lower_layers_import_no_ui_libraries():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in BELOW_RENDER)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'textual', 'matplotlib'))\n"
        + "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_model_layer_does_not_import_upper_layers():
    code = (
        "import sys\nimport qdebug.model.load, qdebug.model.attention\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('qdebug.trace', 'qdebug.replay', 'qdebug.analysis', 'qdebug.render', 'qdebug.tui')))\n"
        "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
