"""`qdebug export onnx`: load the model on CPU in float32 and write its split ONNX export."""

from __future__ import annotations

import time
from pathlib import Path


def run_export_onnx(model: str, out: Path, inject: list[str] | None, opset: int | None):
    """Export `model` into `out`; returns (manifest, seconds)."""
    from qdebug.commands.common import quiet_transformers

    quiet_transformers()
    from qdebug.export.build import deepstack_count, export_onnx
    from qdebug.export.inject import parse_injects
    from qdebug.model.load import load_model

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        from qdebug.errors import InputError

        raise InputError(f"--out {out}: exists and is not an empty directory; expected a new or empty directory")
    # Plain eager attention: the graph holds the model's own ops, not qdebug's recording kernel.
    loaded = load_model(model, "cpu", "float32", attn_implementation="eager")
    injects = parse_injects(inject, len(loaded.adapter.decoder_layers(loaded.model)), deepstack_count(loaded))
    start = time.perf_counter()
    manifest = export_onnx(loaded, out, injects, opset)
    return manifest, time.perf_counter() - start
