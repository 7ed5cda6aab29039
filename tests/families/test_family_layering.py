"""The family modules keep the one-way imports: trace records evidence, analysis judges it, no UI below render."""

import subprocess
import sys

MODULES = [
    "qdebug.model.adapters.qwen3_5", "qdebug.model.adapters.qwen2_audio", "qdebug.model.linear_attention",
    "qdebug.trace.audio", "qdebug.trace.stages.audio", "qdebug.trace.linear_record", "qdebug.trace.deepstack_record",
    "qdebug.trace.family_record",
]


def test_family_modules_import_no_upper_layers():
    code = (
        "import sys\n" + "".join(f"import {m}\n" for m in MODULES)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'textual', 'matplotlib')"
        + " or m.startswith(('qdebug.replay', 'qdebug.analysis', 'qdebug.render', 'qdebug.tui')))\n"
        + "print(bad)\nassert not bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
