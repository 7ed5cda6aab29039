"""`qdebug export onnx`: load the model on CPU in float32 and write its split ONNX export."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qdebug.export.manifest import Manifest


@dataclass(kw_only=True)
class ExportArgs:
    """Everything `qdebug export onnx` was asked for."""

    out: Path
    model: str = "demo"
    inject: list[str] | None = None  # faults broken into the export on purpose
    opset: int | None = None  # None: the exporter's


@dataclass(frozen=True)
class ExportResult:
    """What `qdebug export onnx` wrote: the export's manifest (its graphs and files), and how long it took."""

    out: Path
    manifest: Manifest
    seconds: float


def run_export_onnx(args: ExportArgs) -> ExportResult:
    """Export `args.model` into `args.out` (a new or empty directory)."""
    from qdebug.commands.common import quiet_transformers

    from qdebug.outputs import check_new_folder

    out = check_new_folder("--out", args.out)  # before the model loads
    quiet_transformers()
    from qdebug.export.build import deepstack_count, export_onnx
    from qdebug.export.inject import parse_injects
    from qdebug.model.load import load_model

    # Plain eager attention: the graph holds the model's own ops, not qdebug's recording kernel.
    loaded = load_model(args.model, "cpu", "float32", attn_implementation="eager")
    if loaded.adapter.modality == "audio":
        from qdebug.errors import InputError

        raise InputError(f"export onnx builds image inputs only; {loaded.adapter.name} takes audio "
                         "(expected a checkpoint with a vision tower: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, Qwen2.5-Omni)")
    injects = parse_injects(args.inject, len(loaded.adapter.decoder_layers(loaded.model)), deepstack_count(loaded))
    start = time.perf_counter()
    manifest = export_onnx(loaded, out, injects, args.opset)
    return ExportResult(Path(args.out), manifest, time.perf_counter() - start)
