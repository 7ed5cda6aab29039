"""The report of `qdebug export onnx`: each graph written, the manifest, and any graph left out."""

from __future__ import annotations


def export_lines(result) -> list[str]:
    """The lines `qdebug export onnx` prints for an ExportResult."""
    manifest = result.manifest
    lines = [f"wrote {result.out / graph.file}: {name} ({len(graph.inputs)} inputs, {len(graph.outputs)} stage outputs)"
             for name, graph in manifest.graphs.items()]
    lines.append(f"wrote {manifest.path} (opset {manifest.extra.get('opset')}) in {result.seconds:.1f} s")
    lines += [f"not exported: the {name} graph ({reason}); `diff --onnx` compares the other graph only"
              for name, reason in manifest.extra.get("not_exported", {}).items()]
    return lines
