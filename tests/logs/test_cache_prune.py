"""Building an index clears what older qdebug versions left in the cache (their SQLite files, index folders of another
version, builds a killed run left a day ago) and nothing else: not a link, not a foreign file or folder, not a build
in progress, not a current index."""

from __future__ import annotations

import json
import os
import shutil
import time

from qdebug.analysis.log_index_build import open_log_index
from qdebug.replay.log_codes import INDEX_VERSION
from tests.logs.log_synth import generate_log

KEY = "0123456789abcdef0123456789abcdef"


def test_a_build_removes_stale_entries_of_ours_only(cache, tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    generate_log(first, 2_000, seed=1)
    generate_log(second, 2_000, seed=2)
    current, _, _ = open_log_index([first])
    current_folder = current.path
    current.close()
    old_index = cache / KEY.replace("0", "e")
    shutil.copytree(current_folder, old_index)
    manifest = json.loads((old_index / "manifest.json").read_text())
    (old_index / "manifest.json").write_text(json.dumps({**manifest, "version": INDEX_VERSION - 1}))
    stale = {
        f"{KEY}.sqlite": b"SQLite format 3\x00", f"{KEY}.sqlite-wal": b"", f"{KEY}.sqlite-shm": b"",
    }
    for name, data in stale.items():
        (cache / name).write_bytes(data)
    old_build = cache / f".{KEY}.x1y2.building"
    old_build.mkdir()
    (old_build / "events-00000.parquet").write_bytes(b"half")
    day_ago = time.time() - 25 * 3600
    os.utime(old_build, (day_ago, day_ago))
    fresh_build = cache / f".{KEY.replace('0', '1')}.z9.building"  # another run building now
    fresh_build.mkdir()
    outside = tmp_path / "outside.sqlite"
    outside.write_bytes(b"someone's")
    (cache / f"{KEY.replace('0', '2')}.sqlite").symlink_to(outside)  # a link with our name: left alone
    foreign = cache / KEY.replace("0", "3")  # a folder with our name pattern but not an index
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    (cache / "notes.txt").write_text("mine")

    index, reused, _ = open_log_index([second])  # a cache miss: the build prunes
    assert not reused
    index.close()
    left = {p.name for p in cache.iterdir()}
    assert not left & set(stale) and old_index.name not in left and old_build.name not in left
    assert {fresh_build.name, f"{KEY.replace('0', '2')}.sqlite", foreign.name, "notes.txt", current_folder.name} <= left
    assert outside.read_bytes() == b"someone's" and (foreign / "notes.txt").read_text() == "mine"
    again, reused, _ = open_log_index([first])  # the current index was kept: a hit
    assert reused
    again.close()
