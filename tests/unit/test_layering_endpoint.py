"""The endpoint client, its analysis and the offset measurements stay below render; serve pulls in no UI library."""

import subprocess
import sys

MODULES = ["qdebug.replay.endpoint", "qdebug.analysis.endpoint", "qdebug.analysis.offsets", "qdebug.serve.app", "qdebug.serve.waves"]


def test_endpoint_and_serve_import_no_ui_libraries():
    code = (
        "import sys\n" + "".join(f"import {m}\n" for m in MODULES)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'textual', 'matplotlib') or m.startswith(('qdebug.render', 'qdebug.tui')))\n"
        + "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
