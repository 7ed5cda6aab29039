"""The folder `--index-only --out DIR` writes: what is there is checked before any work, an index is built out of sight
and its files put in place one by one, and nothing but the files an index of ours lists is ever replaced or removed.

An index is recognised by its own manifest (format name, a version, the files it lists); a user's file is never
overwritten (a name the new index needs that no manifest of ours lists is refused before the scan), DIR's mode is
never changed, and a build lives in `DIR/.qdebug-index.PID.XXXX.building/index/`, which no documented pattern
(`fleet/*/events-*.parquet`) reaches. A build a killed run left is removed by the next run once its process is gone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from qdebug.errors import ReplayFormatError
from qdebug.replay.log_codes import INDEX_VERSION
from qdebug.replay.log_parquet import FINDINGS, FORMAT, MANIFEST, REQUESTS

_PART = re.compile(r"events-\d{5}\.parquet")
_BUILD = re.compile(r"\.qdebug-index\.(\d+)\.[^/]+\.building")
OWNER = ".owner"  # in a build folder: {"host", "pid"} of the run building there
MANIFEST_MAX_BYTES = 64 << 20  # a manifest larger than this is no manifest of ours (a million parts is 100 MiB)
# A build whose owner file is missing (a run killed in the instant between making the folder and writing it) or names
# another host is judged by age alone.
STALE_BUILD_SECONDS = 24 * 3600


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:200] + "..."


def write_owner(folder: Path) -> None:
    """Mark a build folder as this process's (so a later run can tell a live build from a dead one's)."""
    (folder / OWNER).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def build_is_stale(folder: Path, now: float | None = None) -> bool:
    """Whether a build folder was left by a run that is gone: its owner is a process of this host that no longer
    exists; without an owner file (or another host's), when it is older than STALE_BUILD_SECONDS."""
    try:
        owner = json.loads((folder / OWNER).read_text(encoding="utf-8"))
        host, pid = owner["host"], int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        host = pid = None
    if host == socket.gethostname() and pid is not None and pid > 0:
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True  # no such process: it was killed (SIGKILL, a crash, a reboot)
        except OSError:
            return False  # another user's live process
        return False
    try:
        return (now or time.time()) - os.lstat(folder).st_mtime > STALE_BUILD_SECONDS
    except OSError:
        return False


def claimed_names(folder: Path) -> set[str] | None:
    """The files an index of ours in `folder` lists (its manifest's parts, requests, findings, the manifest itself,
    and what an interrupted swap was replacing), or None when its manifest.json is not a qdebug log index's."""
    path = folder / MANIFEST
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MANIFEST_MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("version"), int):
        return None
    parts = doc.get("parts", [])
    replacing = doc.get("replacing", [])
    if not isinstance(parts, list) or not isinstance(replacing, list):
        return None
    names = {MANIFEST, REQUESTS, FINDINGS}
    names |= {p["file"] for p in parts if isinstance(p, dict) and isinstance(p.get("file"), str) and _PART.fullmatch(p["file"])}
    names |= {n for n in replacing if isinstance(n, str) and (_PART.fullmatch(n) or n in (REQUESTS, FINDINGS))}
    return names


@dataclass
class Build:
    """A build in progress: its folder (removed at the end) and the index folder inside it."""

    root: Path
    index: Path


@dataclass
class OutFolder:
    """`--out DIR` as checked before the scan: whether it existed, the files its index of ours lists, the new names."""

    path: Path
    existed: bool
    claimed: set[str]
    new_names: set[str]
    made: list[Path] = field(default_factory=list)

    @classmethod
    def check(cls, out: Path, parts: int) -> OutFolder:
        """What `out` is: a new or empty folder, or one holding an index of ours (any version); else a one-line error
        naming what is in the way. `parts`: how many events partitions the new index has (one per log file)."""
        from qdebug.replay.log_sql import literal_path

        new_names = {f"events-{k:05d}.parquet" for k in range(parts)} | {REQUESTS, FINDINGS, MANIFEST}
        shown = _shown(out)
        literal_path(out)  # a path DuckDB cannot be given as it is: refused before anything is made
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise ReplayFormatError(f"--out {shown}: already exists and is not a folder (expected a new or empty folder, "
                                    "or one a previous --index-only wrote)")
        if not out.exists():
            return cls(out, False, set(), new_names)
        try:
            names = {p.name for p in out.iterdir()}
        except OSError as exc:
            raise ReplayFormatError(f"--out {shown}: cannot be read ({exc.strerror or exc}) (expected a folder you can write)") from None
        names = {n for n in names if not _BUILD.fullmatch(n)}  # builds of ours, live or stale: not in the way
        claimed = claimed_names(out)
        if claimed is None and names:
            first = MANIFEST if MANIFEST in names else sorted(names)[0]
            raise ReplayFormatError(f"--out {shown}: already exists and is not a log index ({first} in it is not one "
                                    "qdebug wrote; nothing there is replaced) (expected a new or empty folder, or one a previous "
                                    "--index-only wrote)")
        claimed = claimed or set()
        clash = sorted((new_names - claimed) & names)
        if clash:
            raise ReplayFormatError(f"--out {shown}: {clash[0]} in it is not listed by its index's manifest (a file of "
                                    "yours?): not replaced (expected a folder holding only a previous --index-only's files "
                                    "under those names)")
        return cls(out, True, claimed, new_names)

    def begin(self) -> Build:
        """Make the folder (and its parents) if new, clear builds dead runs left in it, and start a build inside."""
        if not self.existed:
            missing = [p for p in [self.path, *self.path.parents] if not p.exists()]
            for folder in reversed(missing):
                try:
                    folder.mkdir()  # the user's umask decides its mode, as for any folder they make
                except FileExistsError:
                    continue
                except OSError as exc:
                    self._remove_made()
                    raise ReplayFormatError(f"--out {_shown(self.path)}: cannot make {folder} ({exc.strerror or exc}) "
                                            "(expected a folder you can write)") from None
                self.made.append(folder)
        self._clear_stale()
        try:
            root = Path(tempfile.mkdtemp(prefix=f".qdebug-index.{os.getpid()}.", suffix=".building", dir=self.path))
        except OSError as exc:
            self._remove_made()
            raise ReplayFormatError(f"--out {_shown(self.path)}: cannot write in it ({exc.strerror or exc}) "
                                    "(expected a folder you can write)") from None
        write_owner(root)
        (root / "index").mkdir()
        return Build(root, root / "index")

    def put_in_place(self, build: Build) -> None:
        """Replace the files of the old index (only those its manifest lists) with the new one's, the manifest last.
        Meanwhile the manifest says the index is incomplete and lists every name being replaced: a run killed halfway
        leaves a folder the next --index-only recognises and finishes replacing."""
        names = {p.name for p in self.path.iterdir()}
        clash = sorted((self.new_names - self.claimed) & names)  # a file of the user's appeared during the build
        if clash:
            raise ReplayFormatError(f"--out {_shown(self.path)}: {clash[0]} appeared in it while the index was built: not "
                                    "replaced (expected the folder left alone while --index-only runs)")
        data = sorted(self.new_names - {MANIFEST})
        interim = {"format": FORMAT, "version": INDEX_VERSION, "complete": False, "replacing": sorted((self.claimed | set(data)) - {MANIFEST})}
        tmp = build.root / MANIFEST
        tmp.write_text(json.dumps(interim))
        os.replace(tmp, self.path / MANIFEST)
        for name in sorted(self.claimed - self.new_names):  # partitions the old index had and the new one has not
            (self.path / name).unlink(missing_ok=True)
        for name in data:
            os.replace(build.index / name, self.path / name)
        os.replace(build.index / MANIFEST, self.path / MANIFEST)
        shutil.rmtree(build.root, ignore_errors=True)

    def abandon(self, build: Build | None = None) -> None:
        """Remove a build (interrupted or failed) and the folders this run made, when empty: nothing left behind."""
        if build is not None:
            shutil.rmtree(build.root, ignore_errors=True)
        self._remove_made()

    def _remove_made(self) -> None:
        for folder in reversed(self.made):  # deepest first
            try:
                folder.rmdir()
            except OSError:
                break
        self.made = []

    def _clear_stale(self) -> None:
        """Remove builds in the folder that runs now gone left (SIGKILL, a crash): only folders named as ours are."""
        for entry in self.path.iterdir():
            if _BUILD.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink() and build_is_stale(entry):
                shutil.rmtree(entry, ignore_errors=True)
