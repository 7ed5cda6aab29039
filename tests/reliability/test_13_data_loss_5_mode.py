"""Issue 21 item 5: an output that replaces an existing file keeps that file's permission bits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from qdebug.atomic import atomic_path

from .conftest import qdebug

REPO = Path(__file__).resolve().parents[2]
BURST = REPO / "sample_data" / "burst.log"




def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_replay_json_over_a_private_file_stays_private(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("{}")
    out.chmod(0o600)
    proc = qdebug("replay", BURST, "--json", out, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr  # a log with findings exits 1; the file is written either way
    assert "Traceback" not in proc.stderr, proc.stderr
    assert out.read_text() != "{}"  # the report replaced the file ...
    assert _mode(out) == 0o600  # ... and kept its owner-only mode


def test_atomic_path_keeps_an_existing_mode_and_gives_a_new_file_the_usual_one(tmp_path):
    old = tmp_path / "script.sh"
    old.write_text("old")
    old.chmod(0o750)
    with atomic_path(old) as tmp:
        tmp.write_text("new")
    assert old.read_text() == "new" and _mode(old) == 0o750
    new = tmp_path / "new.txt"
    with atomic_path(new) as tmp:
        tmp.write_text("x")
    mask = os.umask(0)
    os.umask(mask)
    assert _mode(new) == 0o666 & ~mask
