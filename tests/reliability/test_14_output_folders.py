"""Issue 21 item 15: `export onnx --out` and `demo train --out` check the folder before any model loads or trains.

The model folder holds only the demo's config.json: loading it would fail with exit 3, so exit 2 naming --out shows the
check ran first.
"""

from __future__ import annotations

import shutil

import pytest

from qdebug.model.load import DEMO_DIR

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def config_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("config-only")
    shutil.copy(DEMO_DIR / "config.json", folder / "config.json")
    return folder


def test_export_out_under_a_file(tmp_path, config_only):
    (tmp_path / "FILE").write_text("x")
    proc = qdebug("export", "onnx", "--out", tmp_path / "FILE" / "sub", "--model", config_only, timeout=120)
    one_line_error(proc, "--out", "is a file, not a folder")
    assert proc.returncode == 2
    assert (tmp_path / "FILE").read_text() == "x"


def test_export_out_is_a_file(tmp_path, config_only):
    (tmp_path / "FILE").write_text("x")
    proc = qdebug("export", "onnx", "--out", tmp_path / "FILE", "--model", config_only, timeout=120)
    one_line_error(proc, "--out", "not an empty directory")
    assert proc.returncode == 2


def test_export_out_through_a_symlink_to_a_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    proc = qdebug("export", "onnx", "--out", tmp_path / "link", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "link").is_symlink()
    assert {"prefill.onnx", "qdebug-onnx.json"} <= {p.name for p in real.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


@pytest.mark.parametrize("sub", ["", "sub"])
def test_demo_train_out_at_or_under_a_file(tmp_path, sub):
    (tmp_path / "FILE").write_text("x")
    out = tmp_path / "FILE" / sub if sub else tmp_path / "FILE"
    proc = qdebug("demo", "train", "--out", out, "--steps", "1", timeout=120)
    one_line_error(proc, "--out", "is a file, not a folder" if sub else "exists and is not a folder")
    assert proc.returncode == 2
    assert (tmp_path / "FILE").read_text() == "x"
