"""Issue 36: an output path where nothing can be created (/proc, /sys) is refused before the work, not after it.

`os.access` says yes to root for every folder, so the check must try: each command below would take seconds (a model
to load, a burst to replay) before it wrote; a one-line error naming the option, exit 2 and no model load show the
check ran first (the model folder given holds only a config.json: loading it would exit 3).
"""

from __future__ import annotations

import shutil

import pytest

from qdebug.model.load import DEMO_DIR
from qdebug.outputs import check_output_path
from qdebug.errors import OutputError

from .conftest import one_line_error, qdebug


@pytest.fixture(scope="module")
def config_only(tmp_path_factory):
    folder = tmp_path_factory.mktemp("config-only")
    shutil.copy(DEMO_DIR / "config.json", folder / "config.json")
    return folder


@pytest.mark.parametrize("option, path", [("--png", "/proc/qdebug-x/y.png"), ("--json", "/sys/qdebug-x.json")])
def test_attn_output_in_a_pseudo_filesystem_is_refused_before_the_model_loads(red_png, config_only, option, path):
    proc = qdebug("attn", red_png, "Describe.", "--model", config_only, option, path, timeout=120)
    one_line_error(proc, option, path, "expected a writable folder")
    assert proc.returncode == 2


def test_replay_timeline_png_in_proc_is_refused_before_the_replay(config_only):
    from pathlib import Path

    capture = Path(__file__).resolve().parents[2] / "sample_data" / "capture.jsonl"
    proc = qdebug("replay", capture, "--model", config_only, "--timeline-png", "/proc/qdebug-x/t.png", timeout=120)
    one_line_error(proc, "--timeline-png", "expected a writable folder")
    assert proc.returncode == 2


def test_the_probe_leaves_nothing_in_a_writable_folder(tmp_path):
    assert check_output_path("--json", tmp_path / "sub" / "deeper" / "a.json") == tmp_path / "sub" / "deeper" / "a.json"
    assert list(tmp_path.iterdir()) == []  # neither the probe nor the missing folders are left behind

