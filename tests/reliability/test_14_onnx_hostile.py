"""Issue 21 item 14: `diff --onnx` with a manifest nested 100k deep, or a graph whose symbolic dimensions only
mismatch when it runs, exits 2 with one line."""

from __future__ import annotations

import json

from .conftest import one_line_error, qdebug


def test_manifest_nested_100k_deep(tmp_path, red_png):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "qdebug-onnx.json").write_text('{"format": "qdebug-onnx-export", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = qdebug("diff", red_png, "Describe.", "--onnx", folder, timeout=300)
    one_line_error(proc, "qdebug-onnx.json", "nested too deeply")
    assert proc.returncode == 2


def _prefill_with_a_hidden_width_of(path, width: int, vocab: int = 80) -> None:
    """A prefill graph whose input width is symbolic (so it passes the checks made before running) and whose MatMul
    takes `width` features: the demo's 128-wide embeddings only fail inside ONNX Runtime."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    embeds = helper.make_tensor_value_info("embeds", TensorProto.FLOAT, [1, "seq", "hidden"])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", vocab])
    weight = numpy_helper.from_array(np.zeros((width, vocab), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["embeds", "w"], ["logits"])], "prefill", [embeds], [logits], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_symbolic_dimensions_that_mismatch_at_run_time(tmp_path, red_png):
    folder = tmp_path / "mine"
    folder.mkdir()
    _prefill_with_a_hidden_width_of(folder / "prefill.onnx", 64)
    (folder / "qdebug-onnx.json").write_text(json.dumps({"format": "qdebug-onnx-export", "version": 1, "graphs": {
        "prefill": {"file": "prefill.onnx", "inputs": {"inputs_embeds": "embeds"}, "outputs": {"logits": "logits"}}}}))
    proc = qdebug("diff", red_png, "Describe.", "--onnx", folder, timeout=300)
    line = one_line_error(proc, "prefill.onnx", "ONNX Runtime could not run it", "MatMul")
    assert proc.returncode == 2 and len(line) < 600, line
    assert [ln for ln in proc.stderr.splitlines() if ln.strip()] == [line]  # not ONNX Runtime's own log line too
