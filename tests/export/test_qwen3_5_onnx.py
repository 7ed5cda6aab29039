"""docs/families.md's Qwen3.5 ONNX cell, measured: the tiny Qwen3.5's export agrees at every stage on a request as long
as the export's sample, and its prefill graph's sequence length is fixed, so another length is one line (exit 2)."""

from __future__ import annotations

import json

from PIL import Image

from tests.cli.installed import qdebug
from tests.docs_text import DOCS
from tests.families.build import build_qwen3_5

SAMPLE_IMAGE = ((112, 112), (90, 140, 200))  # qdebug.export.build.sample_inputs' image


def test_qwen3_5_exports_at_its_samples_length_only(tmp_path):
    import onnx

    page = " ".join((DOCS / "families.md").read_text(encoding="utf-8").split())
    assert ("✓ only on requests as long as the export's own sample (one 112×112 image, \"Describe the image.\"): its "
            "prefill graph comes out with a fixed sequence length") in page
    model = build_qwen3_5(tmp_path / "qwen3_5")
    out = tmp_path / "onnx"
    code, _out, err = qdebug(tmp_path, "export", "onnx", "--model", model, "--out", out)
    assert code == 0, err
    graph = onnx.load(str(out / "prefill.onnx"), load_external_data=False).graph
    embeds = next(i for i in graph.input if i.name == "inputs_embeds")
    seq = embeds.type.tensor_type.shape.dim[1]
    assert seq.dim_value > 0 and not seq.dim_param, seq  # fixed, not a symbol
    same = tmp_path / "same.png"
    Image.new("RGB", *SAMPLE_IMAGE).save(same)
    code, _out, err = qdebug(tmp_path, "diff", same, "Describe the image.", "--onnx", out, "--model", model,
                             "--max-new-tokens", "2", "--json", tmp_path / "same.json")
    assert code == 0, err
    stages = json.loads((tmp_path / "same.json").read_text(encoding="utf-8"))["stages"]
    assert {s["verdict"] for s in stages} == {"ok"}, stages
    other = tmp_path / "other.png"
    Image.new("RGB", (84, 84), (90, 140, 200)).save(other)
    code, _out, err = qdebug(tmp_path, "diff", other, "Describe.", "--onnx", out, "--model", model, "--max-new-tokens", "2")
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("qdebug: error: ") and "ONNX Runtime could not run it" in err
    assert "Traceback" not in err
