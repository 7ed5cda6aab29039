"""Issue 21 item 1: `qdebug demo train --out DIR` never deletes what qdebug did not write, and says so before training."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qdebug.demo.train import CHECKPOINT_DIR, check_out_dir, swap_in
from qdebug.errors import OutputError

from .conftest import one_line_error, qdebug

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _this_tree(monkeypatch):
    """The `qdebug` subprocess runs this checkout's code (its editable install may point at another copy)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def _user_folder(path: Path) -> Path:
    """A folder of someone's own work: a note and a sub-folder."""
    (path / "src").mkdir(parents=True)
    (path / "notes.txt").write_text("mine")
    (path / "src" / "main.py").write_text("print('mine')")
    return path


def _listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_train_into_a_folder_of_user_files_is_refused_before_training(tmp_path):
    folder = _user_folder(tmp_path / "work")
    before = _listing(folder)
    proc = qdebug("demo", "train", "--out", folder, "--steps", "1", timeout=120)
    line = one_line_error(proc, "--out", str(folder), "not a demo checkpoint")
    assert proc.returncode == 2, line
    assert _listing(folder) == before and (folder / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work"]  # no temporary sibling either


def test_train_into_the_current_folder_is_refused(tmp_path):
    folder = _user_folder(tmp_path / "here")
    proc = qdebug("demo", "train", "--out", ".", "--steps", "1", cwd=folder, timeout=120)
    one_line_error(proc, "--out .", "notes.txt")
    assert proc.returncode == 2
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "src" / "main.py").exists()


def test_train_into_a_file_is_refused(tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"weights")
    proc = qdebug("demo", "train", "--out", target, "--steps", "1", timeout=120)
    one_line_error(proc, "--out", "not a folder")
    assert proc.returncode == 2 and target.read_bytes() == b"weights"


def test_which_folders_may_receive_a_checkpoint(tmp_path):
    assert check_out_dir(tmp_path / "new" / "ckpt") == tmp_path / "new" / "ckpt"
    (tmp_path / "empty").mkdir()
    assert check_out_dir(tmp_path / "empty") == tmp_path / "empty"
    assert check_out_dir(CHECKPOINT_DIR) == CHECKPOINT_DIR.resolve()  # the default: the packaged checkpoint
    previous = tmp_path / "previous"
    shutil.copytree(CHECKPOINT_DIR, previous)
    assert check_out_dir(previous) == previous
    (tmp_path / "link").symlink_to(previous)
    assert check_out_dir(tmp_path / "link") == previous  # a symlinked folder: the folder it names
    _user_folder(tmp_path / "user")
    with pytest.raises(OutputError, match="not a demo checkpoint"):
        check_out_dir(tmp_path / "user")
    (previous / "README.md").write_text("my notes on this checkpoint")
    with pytest.raises(OutputError, match="README.md is not a checkpoint file"):
        check_out_dir(previous)
    lookalike = tmp_path / "lookalike"
    lookalike.mkdir()
    (lookalike / "config.json").write_text('{"model_type": "llama"}')
    (lookalike / "model.safetensors").write_bytes(b"someone else's weights")
    with pytest.raises(OutputError, match="not a Qwen2-VL config"):
        check_out_dir(lookalike)


def test_swap_replaces_a_previous_checkpoint_and_keeps_anything_else(tmp_path):
    previous = tmp_path / "ckpt"
    shutil.copytree(CHECKPOINT_DIR, previous)
    new = tmp_path / ".new"
    shutil.copytree(CHECKPOINT_DIR, new)
    (new / "generation_config.json").write_text('{"marker": "new"}')
    swap_in(new, previous)
    assert (previous / "generation_config.json").read_text() == '{"marker": "new"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # the old checkpoint and the temporary are gone
    # A file that appeared during training: the swap is refused, both it and the trained checkpoint are kept.
    newer = tmp_path / ".newer"
    shutil.copytree(CHECKPOINT_DIR, newer)
    (previous / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match=f"notes.txt.*the trained checkpoint is in {newer}"):
        swap_in(newer, previous)
    assert (previous / "notes.txt").read_text() == "mine" and (newer / "model.safetensors").exists()
