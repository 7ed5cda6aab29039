"""render/palette.py draws every event kind and verdict, each with its own glyph."""

from qdebug.render.palette import EVENT_LOOK, STAGE_VERDICT_COLOUR, UNKNOWN_KIND, VERDICT_STYLE, kind_look, verdict_style
from qdebug.vocab import EventKind, StageVerdict, Verdict


def test_every_event_kind_has_a_look_with_its_own_glyph():
    assert set(EVENT_LOOK) == set(EventKind)
    glyphs = [look.glyph for look in EVENT_LOOK.values()]
    assert len(set(glyphs)) == len(glyphs) and UNKNOWN_KIND.glyph not in glyphs
    assert all(look.style and look.marker and look.colour and look.label for look in EVENT_LOOK.values())
    markers = [look.marker for look in EVENT_LOOK.values()]
    assert len(set(markers)) == len(markers)  # a PNG legend tells every kind apart by its marker


def test_every_verdict_has_a_style_and_every_stage_verdict_a_colour():
    assert set(VERDICT_STYLE) == set(Verdict) and all(VERDICT_STYLE.values())
    assert set(STAGE_VERDICT_COLOUR) == set(StageVerdict) and all(STAGE_VERDICT_COLOUR.values())


def test_looks_are_found_by_the_plain_strings_documents_hold():
    assert kind_look("stitch") is EVENT_LOOK[EventKind.SYNC] and kind_look("no such kind") is UNKNOWN_KIND
    assert verdict_style("contaminated") == VERDICT_STYLE[Verdict.CONTAMINATED] and verdict_style("no such verdict") == ""
