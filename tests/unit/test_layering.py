"""Imports flow one way: nothing below render pulls in rich, textual or matplotlib; `--help` stays light."""

import subprocess
import sys

BELOW_RENDER = [
    "qdebug.model.load", "qdebug.model.attention", "qdebug.trace.runner", "qdebug.trace.estimate", "qdebug.trace.policy", "qdebug.trace.stepper", "qdebug.trace.schema",
    "qdebug.replay.engine", "qdebug.replay.formats.detect", "qdebug.replay.report",
    "qdebug.analysis.diff", "qdebug.analysis.replay", "qdebug.analysis.attention", "qdebug.analysis.detectors.layout",
    "qdebug.export.build", "qdebug.export.ort_run", "qdebug.export.as_trace", "qdebug.analysis.onnx_findings",
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


def test_export_layer_uses_only_model_and_trace():
    """qdebug.export sits above trace: it may use model and trace, never replay, analysis, render or the UI."""
    code = (
        "import sys\nimport qdebug.export.build, qdebug.export.ort_run, qdebug.export.as_trace, qdebug.export.manifest\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('qdebug.replay', 'qdebug.analysis', 'qdebug.render', 'qdebug.tui', 'qdebug.commands')))\n"
        "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
