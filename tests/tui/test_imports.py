"""The model, trace and analysis layers never import the UI."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_trace_and_analysis_do_not_import_textual():
    code = "import qdebug.trace.runner, qdebug.trace.stepper, qdebug.analysis.diff, qdebug.analysis.attention, sys; assert 'textual' not in sys.modules, 'textual imported'"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_app_module_imports_no_torch():
    # the first frame must not wait for torch/transformers: they load in the model worker
    code = "import qdebug.tui.app, sys; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
