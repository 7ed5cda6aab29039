"""Issue 21 item 16: an output name the file system takes (up to 255 bytes) is written; its temporary sibling is cut
to fit rather than failing after the run; a name over the limit fails before the run."""

from __future__ import annotations

from qdebug.atomic import atomic_path
from qdebug.trace.schema import load_trace

from .conftest import one_line_error, qdebug


def test_attn_save_with_a_245_character_name(tmp_path, red_png):
    name = "a" * 241 + ".qdt"
    proc = qdebug("attn", red_png, "Describe.", "--save", name, "--max-new-tokens", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary left beside it
    assert load_trace(tmp_path / name).steps


def test_atomic_write_of_a_255_byte_name(tmp_path):
    target = tmp_path / ("é" * 126 + "abc")  # 255 bytes in UTF-8: a cut must not split a character
    with atomic_path(target) as tmp:
        tmp.write_text("done")
    assert target.read_text() == "done"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_attn_save_over_the_limit_fails_before_the_run(tmp_path, red_png):
    name = "a" * 252 + ".qdt"
    proc = qdebug("attn", red_png, "Describe.", "--save", name, "--model", tmp_path / "no-such-model", cwd=tmp_path)
    one_line_error(proc, "--save", "File name too long")
    assert proc.returncode == 2  # the missing model (exit 3) was never reached
