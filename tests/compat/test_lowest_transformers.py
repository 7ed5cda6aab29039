"""The tests that read transformers' processors and chat templates, run again on the lowest transformers the range in
pyproject.toml allows (the suite itself runs on the newest a fresh install resolves).

`scripts/lowest-env` builds that environment (linked as `.venv-lowest`; $QDEBUG_LOWEST_PYTHON names another python);
without it these tests are skipped with that reason, except under CI, where they fail."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.built_envs import built_python

REPO = Path(__file__).resolve().parents[2]
# The family contract and the video tests: every family's processor output (spans, rows, grids, templates) and
# Qwen3-VL's `<t seconds>` layout, which changed within the range (5.25 drops the outer vision start/end).
SUITES = ("tests/video", "tests/families/test_contract.py",
          # Omni's video with its own sound: the processor option that asks for it was renamed within the range
          # (use_audio_in_video before 5.25, load_audio_from_video since; an unknown one is dropped silently)
          "tests/families/test_qwen2_5_omni.py::test_each_encoder_rows_land_at_its_own_spans[True]",
          "tests/families/test_qwen2_5_omni.py::test_a_video_with_its_sound_interleaves_in_time_chunks_and_positions_follow_the_models_function",
          "tests/families/test_qwen2_5_omni.py::test_traced_tokens_equal_untraced_generate[True]")
# Run by the lowest environment's python from the checkout (its qdebug first on the path): which transformers and
# which qdebug it imported, then the tests.
RUNNER = ("import sys, transformers, qdebug, pytest; print('ran-with', transformers.__version__, qdebug.__file__, flush=True); "
          "sys.exit(pytest.main(sys.argv[1:]))")


def _lowest_python() -> Path | None:
    """$QDEBUG_LOWEST_PYTHON, else the repo's .venv-lowest python (None when neither exists)."""
    given = os.environ.get("QDEBUG_LOWEST_PYTHON")
    path = Path(given) if given else REPO / ".venv-lowest" / "bin" / "python"
    return path if path.exists() else None


def _range_floor() -> str:
    """The lower bound of transformers in pyproject.toml's dependencies."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"transformers\b", d)]
    return re.search(r">=\s*([\w.]+)", spec).group(1)


def _pinned() -> str:
    """The transformers version scripts/lowest-env installs."""
    return re.search(r'^TRANSFORMERS="transformers==([\w.]+)"', (REPO / "scripts" / "lowest-env").read_text(), re.M).group(1)


@pytest.fixture(scope="module")
def lowest_py():
    """The lowest environment's python; CI builds it (scripts/lowest-env), so there a missing one fails."""
    return built_python(_lowest_python(), "lowest-transformers", "scripts/lowest-env")


def test_the_environment_pins_the_floor_of_the_range():
    assert _pinned() == _range_floor(), "scripts/lowest-env must install the lower bound pyproject.toml declares"


def test_processor_and_template_tests_pass_on_the_lowest_transformers(lowest_py, tmp_path):
    report = tmp_path / "lowest.xml"
    args = ["-q", "-p", "no:cacheprovider", f"--junitxml={report}", *SUITES]
    done = subprocess.run([str(lowest_py), "-c", RUNNER, *args], cwd=REPO, capture_output=True, text=True, timeout=1200)
    tail = (done.stdout + done.stderr)[-3000:]
    ran = re.search(r"^ran-with (\S+) (\S+)$", done.stdout, re.M)
    assert ran, f"the lowest environment's python did not start the tests:\n{tail}"
    version, module = ran.groups()
    assert version == _range_floor(), f"{lowest_py} has transformers {version}: rerun scripts/lowest-env"
    assert Path(module).resolve().is_relative_to(REPO), f"it imported another checkout's qdebug: {module}"
    assert done.returncode == 0, f"on transformers {version}:\n{tail}"
    suite = ET.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    # Every selected test ran and passed: 9 video-family tests and the contract's families among them, none skipped.
    assert counts["tests"] >= 40 and counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts


def test_a_folder_it_did_not_make_is_refused_and_left_as_it_was(tmp_path):
    user = tmp_path / "u"
    user.mkdir()
    (user / "f").write_text("data\n")
    env = {**os.environ, "QDEBUG_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(["bash", str(REPO / "scripts" / "lowest-env"), str(user)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2 and done.stderr.splitlines() == [done.stderr.strip()], done.stderr  # one line
    assert done.stderr.startswith(f"lowest-env: error: {user} exists and was not built by this script")
    assert sorted(p.name for p in user.iterdir()) == ["f"] and (user / "f").read_text() == "data\n"
