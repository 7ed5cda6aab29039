"""Item 1: unwritable outputs are one-line errors found before the model loads; late write errors are one line too."""

from __future__ import annotations

import os

import pytest

from .conftest import one_line_error, qdebug

NO_MODEL = "/nonexistent/model"  # loading it would fail with exit 3: an exit 2 naming the output proves the order


def test_json_onto_a_directory_is_refused_before_the_model(tmp_path, red_png):
    (tmp_path / "out").mkdir()
    proc = qdebug("attn", red_png, "Describe.", "--model", NO_MODEL, "--json", tmp_path / "out")
    line = one_line_error(proc, "--json", "is a directory")
    assert proc.returncode == 2, line


def test_save_under_a_file_is_refused_before_the_model(tmp_path, red_png):
    (tmp_path / "f").write_text("x")
    proc = qdebug("attn", red_png, "Describe.", "--model", NO_MODEL, "--save", tmp_path / "f" / "x.qdt")
    one_line_error(proc, "--save", "is a file, not a folder")
    assert proc.returncode == 2


def test_json_into_a_read_only_folder_is_refused(tmp_path, red_png, monkeypatch):
    from typer.testing import CliRunner

    import qdebug.outputs
    from qdebug.cli import app

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    real_access = os.access
    # root bypasses permission bits, so the folder is also denied the way a read-only mount denies it (EROFS)
    monkeypatch.setattr(qdebug.outputs.os, "access", lambda p, mode: False if os.fspath(p) == os.fspath(ro) else real_access(p, mode))
    result = CliRunner().invoke(app, ["attn", str(red_png), "Describe.", "--model", NO_MODEL, "--json", str(ro / "r.json")])
    assert result.exit_code == 2, result.output
    assert "not writable" in result.output and "Traceback" not in result.output
    assert not (ro / "r.json").exists()


def test_replay_and_diff_check_their_outputs_first(tmp_path, red_png):
    (tmp_path / "d").mkdir()
    capture = tmp_path / "c.jsonl"
    capture.write_text("{}\n")
    proc = qdebug("replay", capture, "--model", NO_MODEL, "--timeline-png", tmp_path / "d")
    one_line_error(proc, "--timeline-png", "is a directory")
    proc = qdebug("diff", red_png, "Describe.", "--model", NO_MODEL, "--png", tmp_path / "d")
    one_line_error(proc, "--png", "is a directory")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_png_to_a_full_device_is_one_line_after_the_run(red_png):
    proc = qdebug("attn", red_png, "Describe.", "--device", "cpu", "--max-new-tokens", "2", "--png", "/dev/full")
    one_line_error(proc, "cannot write /dev/full", "No space left on device")
    assert proc.returncode == 2
