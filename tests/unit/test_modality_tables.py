"""The render and TUI layers keep what differs by modality in one table each (PNGS, FORMS): every modality a trace item
can have is in each, and an image trace is drawn through its entry."""

from __future__ import annotations

from pathlib import Path

from qdebug.trace.items import MODALITIES

DATA = Path(__file__).resolve().parents[1] / "data"


def test_every_modality_has_an_entry_in_each_layer_table():
    from qdebug.render.attention_pngs import PNGS
    from qdebug.tui.widgets.attention_forms import FORMS

    for table in (PNGS, FORMS):
        assert set(table) == set(MODALITIES)


def test_an_image_trace_is_drawn_as_image_through_the_tables(tmp_path):
    from qdebug.analysis.item_attention import drawn_as
    from qdebug.render.attention_pngs import PNGS
    from qdebug.render.png_text import read_text_boxes
    from qdebug.trace.schema import load_trace

    trace = load_trace(DATA / "red_circle.qdt")
    assert drawn_as(trace) == "image"
    png = PNGS["image"](trace, [], tmp_path / "a.png", steps=[0], layer=None, head=None)
    _, boxes = read_text_boxes(png)
    assert any("generated token 0" in text for text, _ in boxes)  # the image drawer's title, through the table


def test_a_trace_with_nothing_to_draw_over_has_no_form():
    from qdebug.analysis.item_attention import drawn_as
    from qdebug.trace.schema import load_trace

    trace = load_trace(DATA / "red_circle.qdt")
    trace.images = []
    assert drawn_as(trace) is None
