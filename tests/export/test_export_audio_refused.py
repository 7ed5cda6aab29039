"""docs/families.md: `export onnx` builds image inputs only, so a Qwen2-Audio checkpoint is one line naming why (exit 2,
nothing written), not the placeholder-span error the image sample used to raise on it."""

from __future__ import annotations

import shutil
import subprocess

from tests.docs_text import DOCS
from tests.families.build import build_qwen2_audio


def test_export_onnx_refuses_an_audio_checkpoint_in_one_line(tmp_path):
    page = " ".join((DOCS / "families.md").read_text(encoding="utf-8").split())
    assert "| Qwen2-Audio | ✓ | ✗ the export builds image inputs only |" in page
    model = build_qwen2_audio(tmp_path / "qwen2_audio")
    out = tmp_path / "onnx"
    done = subprocess.run([shutil.which("qdebug") or "qdebug", "export", "onnx", "--model", str(model), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("qdebug: error: export onnx builds image inputs only; Qwen2AudioForConditionalGeneration takes audio")
    assert "Traceback" not in done.stderr and not out.exists()
