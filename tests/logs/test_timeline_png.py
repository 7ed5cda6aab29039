"""The offset-timeline PNG: time × offset for a log, binned for a large one; labels never overlap."""

from __future__ import annotations

from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from qdebug.cli import app
from qdebug.render.label_place import LabelPlacer
from qdebug.render.offset_timeline import _clock

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "burst.log"


def test_log_png_is_written(cache, tmp_path):
    png = tmp_path / "t.png"
    result = CliRunner().invoke(app, ["replay", str(SAMPLE), "--timeline-png", str(png)])
    assert result.exit_code == 1, result.output  # the log holds contaminated requests
    with Image.open(png) as im:
        assert im.format == "PNG" and im.width > 1000
        # red bars (overwrites) are drawn
        assert any(r > 180 and g < 80 and b < 80 for r, g, b in im.convert("RGB").getdata())


def test_large_log_png_is_binned(cache, tmp_path):
    from tests.logs.log_synth import generate_log

    log, png = tmp_path / "svc.log", tmp_path / "big.png"
    generate_log(log, 30_000, seed=4)
    result = CliRunner().invoke(app, ["replay", str(log), "--timeline-png", str(png)])
    assert result.exit_code == 1, result.output  # the generated log holds contaminating overwrites
    with Image.open(png) as im:
        assert im.format == "PNG"


def test_clock_is_milliseconds_from_the_first_event_or_order():
    from qdebug.replay.batch import Event

    events = [Event("stitch", "a", t=1720794187.103, seq=0), Event("stitch", "b", t=1720794187.353, seq=1)]
    x, label = _clock(events)
    assert round(x(events[1]), 3) == 250.0 and "2024-07-12T14:23:07.103 UTC" in label
    untimed = [Event("stitch", "a", seq=0), Event("stitch", "b", seq=7)]
    x, label = _clock(untimed)
    assert x(untimed[1]) == 7.0 and "event order" in label


def test_labels_stagger_then_drop_instead_of_overlapping_or_crossing_a_bar():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    labels = LabelPlacer(ax)
    labels.block(4, 4, 6, 6)  # a bar around the point: no label may cross it
    bar = labels.obstacles[0]
    placed = [labels.add(5, 5, f"S {i}: visual@256 text@0") for i in range(80)]
    assert placed[:2] == [True, True] and not all(placed) and labels.dropped == placed.count(False)
    boxes = labels.boxes
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:] + [bar]:
            assert a[2] <= b[0] or a[0] >= b[2] or a[3] <= b[1] or a[1] >= b[3]
    plt.close(fig)
