"""`qdebug diff --order both`: the JSON's top level and the PNG speak for both orders, not the first one only."""

import json
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from qdebug.cli import app

runner = CliRunner()
IMAGE = str(Path(__file__).resolve().parents[2] / "sample_data" / "blue_square_bottom_right.png")


def test_both_orders_at_top_level_and_in_the_png(tmp_path):
    one, both = tmp_path / "one.png", tmp_path / "both.png"
    args = ["diff", IMAGE, "Describe the image.", "--inject", "head-first:2", "--device", "cpu", "--max-new-tokens", "4"]
    single = runner.invoke(app, [*args, "--png", str(one)])
    assert single.exit_code == 1, single.output
    result = runner.invoke(app, [*args, "--order", "both", "--json", "-", "--png", str(both)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["order"] == "both" and list(data["orders"]) == ["image-first", "text-first"]
    for order, summary in data["orders"].items():
        comparison = next(c for c in data["comparisons"] if c["order"] == order)
        assert summary["first_divergence"] == comparison["first_divergence"]
        assert summary["first_divergence"]["stage"] == "layer.2"
    assert data["first_divergence_order"] == "image-first"
    assert {f["order"] for f in data["findings"]} == {"image-first", "text-first"}
    with Image.open(one) as a, Image.open(both) as b:
        assert b.height > 1.6 * a.height  # one panel per order
