"""Build (or reopen) a runtime log's index: scan into Parquet partitions, derive verdicts and findings in SQL.

Memory holds one chunk's columns (and DuckDB's bounded working set when the verdicts are derived): every event goes
straight to the Parquet file of its log's partition as the scan hands it over.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qdebug.replay.formats.log_scan import ScanStats, is_regular, log_paths, order_files, scan_files
from qdebug.replay.log_index import LogIndex, cache_dir, cache_key, file_identity
from qdebug.replay.log_parquet import MANIFEST, IndexWriter

# What qdebug writes in an index folder: a cache entry holding only these is ours to replace when it is broken.
_OURS = ("manifest.json", "requests.parquet", "findings.parquet", ".manifest.json.tmp", ".spill")


def default_host() -> str:
    """This machine's name, as an index records it when --host is not given."""
    return socket.gethostname() or "localhost"


def build_index(paths: list[Path], target: Path, progress: Callable[[int, int, int], None] | None = None,
                host: str | None = None, stats: ScanStats | None = None,
                reuse_from: Path | None = None, opened: bool = True,
                finish_interrupted: bool = True) -> tuple[LogIndex | None, bool]:
    """Scan the files (in time order) into a new index folder at target; (index, interrupted by Ctrl-C or SIGTERM).

    `reuse_from`: a cache folder holding an index of the first of these files, whose partitions are taken as they
    are; only the files after them are read (a rotated log appended to the list adds a partition). Not `opened`:
    the index is None, for a caller that opens the folder where it moves it (one DuckDB and check the fewer).
    Not `finish_interrupted`: a stopped build is abandoned at once (None, True), for a caller that discards it.
    """
    target.mkdir(parents=True, exist_ok=True)
    writer = IndexWriter(target, host or default_host())
    stats = stats if stats is not None else ScanStats()
    order = [file_identity(p) for p in paths]
    identities = {str(p): i for p, i in zip(paths, order)}
    todo = paths
    reuse = None if reuse_from is None else _earlier_index(reuse_from, order, writer.host)
    if reuse is not None:
        folder, old = reuse
        n = len(old["parts"])
        # the same files, maybe under new names (logrotate renamed them): the partitions say what they are called now
        writer.reuse_parts(folder, [{**part, "source": str(p)} for part, p in zip(old["parts"], paths)])
        todo = paths[n:]
        stats.total_lines, stats.unknown_lines, stats.events = old["total_lines"], old["unknown_lines"], old["events"]
        stats.bytes_read, stats.bytes_total = old["bytes_read"], old["bytes_total"]
        stats.files = [{**entry, "path": str(p)} for entry, p in zip(old["files"], paths)]
        stats.changes = list(old["changes"])
    interrupted = False
    t0 = time.perf_counter()
    started = {"files": len(stats.files)}

    summary: dict = {}

    def on_table(table) -> None:
        # a new partition each time the scan moves on to the next file
        while started["files"] < len(stats.files):
            path = stats.files[started["files"]]["path"]
            writer.begin_part(path, identities.get(path, ""))
            started["files"] += 1
        writer.add(table, summary.pop("chunk", None))

    try:
        scan_files(todo, on_table, progress, stats, as_tables=True, on_summary=lambda s: summary.update(chunk=s))
    except KeyboardInterrupt:
        interrupted = True
    while started["files"] < len(stats.files):  # files with no events still get their (empty) partition
        path = stats.files[started["files"]]["path"]
        writer.begin_part(path, identities.get(path, ""))
        started["files"] += 1
    meta = {
        "complete": not interrupted, "sources": [str(p) for p in paths], "files": stats.files,
        "total_lines": stats.total_lines, "unknown_lines": stats.unknown_lines, "events": stats.events,
        "bytes_read": stats.bytes_read, "bytes_total": stats.bytes_total, "changes": stats.changes,
        "build_seconds": round(time.perf_counter() - t0, 3), "reused_parts": 0 if reuse is None else len(reuse[1]["parts"]),
    }
    if interrupted and not finish_interrupted:
        writer.abandon()
        return None, True
    try:
        writer.finish(meta)  # log_sql turns DuckDB's "Query interrupted" back into KeyboardInterrupt / Terminated
    except KeyboardInterrupt:  # (SIGTERM too) while the SQL ran: the events are stored, so finish for this run's
        if not finish_interrupted:  # report, uncached; a second Ctrl-C stops for good
            writer.abandon()
            return None, True
        interrupted = True
        writer.finish({**meta, "complete": False})
    return LogIndex.open(target, partial=True) if opened else None, interrupted


def index_logs(sources: Sequence[str | os.PathLike], out: Path, host: str | None = None,
               progress: Callable[[int, int, int], None] | None = None, stats: ScanStats | None = None) -> tuple[LogIndex | None, bool]:
    """`--index-only`: index the logs into the folder `out` (made, or holding an index of ours whose files are
    replaced; a user's own files there are never touched); (index, False), or (None, True) when a signal stopped it
    (`out` then as it was)."""
    from qdebug.signals import deferred

    from .log_index_out import OutFolder

    paths = order_files(log_paths(list(sources)))
    folder = OutFolder.check(out, max(1, len(paths)))  # before any work: what is there and what would be replaced
    with deferred():
        build = folder.begin()
    try:
        _, interrupted = build_index(paths, build.index, progress, host, stats, opened=False, finish_interrupted=False)
        if not interrupted:
            with deferred():  # the files go in whole: no signal between the first rename and the manifest
                folder.put_in_place(build)
    except BaseException:
        with deferred():
            folder.abandon(build)
        raise
    if interrupted:
        with deferred():
            folder.abandon(build)
        return None, True
    return LogIndex.open(out), False


def open_log_index(
    sources: Sequence[str | os.PathLike], progress: Callable[[int, int, int], None] | None = None, use_cache: bool = True,
    stats: ScanStats | None = None,
) -> tuple[LogIndex, bool, bool]:
    """The index of one or more runtime logs: (index, reused from the cache, interrupted while building).

    Files are read in time order (rotated `svc.log.2.gz svc.log.1.gz svc.log` in any order on the command line).
    An interrupted build is kept only for this run; a finished one is cached under the files' key.
    """
    from qdebug.signals import deferred

    from .log_index_out import OWNER, write_owner

    paths = order_files(log_paths(list(sources)))
    key = cache_key(paths)
    folder = cache_dir()
    cached = folder / key
    if not all(is_regular(p) for p in paths):
        use_cache = False  # a pipe's stream is read once: its path names no content a later run could reuse
    if use_cache:
        found = LogIndex.open(cached)
        if found is not None:
            return found, True, False
        if os.path.lexists(cached) and not _ours(cached):
            use_cache = False  # a link, a file or someone's folder there is not ours to replace: build for this run only
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if use_cache:
            prune_stale(folder)
        with deferred():  # its owner written with it: a later run removes it only once this process is gone
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".building", dir=folder))
            write_owner(tmp)
    except OSError:  # no writable cache: build in a private temp folder, used for this run only
        tmp = Path(tempfile.mkdtemp(prefix="qdebug-log-"))
        use_cache = False
    try:
        _, interrupted = build_index(paths, tmp, progress, stats=stats, reuse_from=folder if use_cache else None,
                                     opened=False)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if use_cache and not interrupted:
        try:
            with deferred():  # no signal between taking the old entry away and putting the new one there
                (tmp / OWNER).unlink(missing_ok=True)
                _put_in_place(tmp, cached)
        except OSError:  # the cache entry cannot be replaced (permissions, a race with another run): use this build
            pass
        else:
            reopened = LogIndex.open(cached)
            if reopened is not None:
                return reopened, False, False
            tmp = cached
    index = LogIndex.open(tmp, partial=True)
    _remove_at_exit(tmp)
    if index is None:  # what was just written does not read back (a full disk, the folder changed under it)
        from qdebug.errors import ReplayFormatError

        raise ReplayFormatError(f"the log index just built in {tmp} does not read back; expected qdebug's own index files there")
    return index, False, interrupted


def _earlier_index(folder: Path, identities: list[str], host: str) -> tuple[Path, dict] | None:
    """A cached index of the first of these files (the same files, unchanged, under any name: their identities match)
    written under this host, the longest one: its partitions are reused and only the files after them read."""
    import json

    from qdebug.replay.log_codes import INDEX_VERSION
    from qdebug.replay.log_parquet import check_index

    if len(identities) < 2:
        return None
    best = None
    try:
        entries = [e for e in folder.iterdir() if not e.name.startswith(".") and e.is_dir() and not e.is_symlink()]
    except OSError:
        return None
    for entry in entries:
        try:
            parts = json.loads((entry / MANIFEST).read_text(encoding="utf-8")).get("parts")
            n = len(parts)
            if not (0 < n < len(identities)) or [p.get("identity") for p in parts] != identities[:n] or (best and n <= len(best[1]["parts"])):
                continue
        except (OSError, ValueError, AttributeError, TypeError):  # not an index of ours: never reused
            continue
        manifest, _problem = check_index(entry, INDEX_VERSION)
        # a file that grew or shrank while read is read again; so are partitions stored under another host name
        if manifest is not None and manifest.get("changes") == [] and manifest.get("host") == host:
            best = (entry, manifest)
    return best


# Cache entries of ours no qdebug of this version reads: the SQLite index of versions 1-2 (`<key>.sqlite` and its
# journal files), an index folder of another version, and a build a killed run left behind (its owner process is gone;
# without an owner file, a day ago or more: log_index_out.build_is_stale).
_KEY = r"[0-9a-f]{32}"
_OLD_SQLITE = re.compile(_KEY + r"\.sqlite(-wal|-shm|-journal)?")
_BUILDING = re.compile(r"\." + _KEY + r"\..+\.building")


def prune_stale(folder: Path) -> list[str]:
    """Remove what qdebug left in its cache that this version never reads (names as above, plain files and folders,
    never a link or anything named otherwise); the names removed. Called when an index is built, so a hit stays fast."""
    from qdebug.replay.log_codes import INDEX_VERSION

    from .log_index_out import build_is_stale

    removed: list[str] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        try:
            st = os.lstat(entry)
            if stat.S_ISREG(st.st_mode) and _OLD_SQLITE.fullmatch(entry.name):
                entry.unlink()
            elif not stat.S_ISDIR(st.st_mode):
                continue
            elif re.fullmatch(_KEY, entry.name) and _ours(entry) and _version(entry) not in (INDEX_VERSION, None):
                shutil.rmtree(entry)
            elif _BUILDING.fullmatch(entry.name) and build_is_stale(entry, now):
                shutil.rmtree(entry)
            else:
                continue
        except OSError:  # another run removed it first, or it is not ours to remove: leave it
            continue
        removed.append(entry.name)
    return removed


def _version(folder: Path):
    """The index version a folder's manifest names (None when it cannot be read)."""
    import json

    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        return None


def drop_cached(path: Path) -> None:
    """Remove a cache entry of ours that turned out unreadable (the next open rebuilds it)."""
    if _ours(path):
        shutil.rmtree(path, ignore_errors=True)


def _is_part(name: str) -> bool:
    return name.startswith("events-") and name.endswith(".parquet")


def _ours(path: Path) -> bool:
    """A real folder holding a manifest and only what qdebug writes in an index: a broken one of ours, replaceable."""
    try:
        if path.is_symlink() or not path.is_dir():
            return False
        names = [p.name for p in path.iterdir()]
    except OSError:
        return False
    return MANIFEST in names and all(n in _OURS or _is_part(n) for n in names)


def _put_in_place(tmp: Path, target: Path) -> None:
    """Move a finished index folder to target, replacing a previous (broken or older) index of ours there."""
    if os.path.lexists(target):
        stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".stale", dir=target.parent))
        os.replace(target, stale / "old")
        try:
            os.replace(tmp, target)
        finally:
            shutil.rmtree(stale, ignore_errors=True)
    else:
        os.replace(tmp, target)


def _remove_at_exit(path: Path) -> None:
    import atexit

    atexit.register(shutil.rmtree, path, ignore_errors=True)
