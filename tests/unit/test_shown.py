"""Untrusted text is shown as data: hidden characters escaped, length capped, never Rich markup."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from qdebug.render.data_text import data
from qdebug.shown import shown


def test_controls_bidi_and_separators_are_escaped_and_text_is_kept():
    assert shown("req-01 ü 漢字 A\u00a0B") == "req-01 ü 漢字 A\u00a0B"
    assert shown("a\x1b[31mb\x00c\u202ed\u2028e\ud800") == "a\\x1b[31mb\\x00c\\u202ed\\u2028e\\ud800"
    assert shown("one\ntwo\tthree") == "one\\ntwo\\tthree"
    assert shown("one\ntwo", newlines=True) == "one\ntwo"


def test_long_text_is_cut_and_says_how_much_was_left_out():
    assert shown("x" * 10, limit=4) == "xxxx… (6 more characters)"
    assert shown("x" * 10, limit=None) == "x" * 10
    assert shown(12345) == "12345"


def test_data_is_never_markup_in_a_table():
    out = io.StringIO()
    table = Table()
    table.add_column("id")
    for text in ("[/x]req", "[link=http://evil]click[/link]", "[bold]b", "[/INST] answer"):
        table.add_row(data(text))
    Console(file=out, width=80, color_system=None).print(table)
    for text in ("[/x]req", "[link=http://evil]click[/link]", "[bold]b", "[/INST] answer"):
        assert text in out.getvalue()
