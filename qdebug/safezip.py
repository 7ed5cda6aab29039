"""Read members of untrusted zips (.qdt, .qdr) within limits: declared sizes and ratios checked first, then streamed."""

from __future__ import annotations

import zipfile
from pathlib import Path

from qdebug.errors import TraceFormatError

_MiB = 1 << 20
# Limits, each overridable by an environment variable (bytes): a trace member, the whole archive, and the
# expansion ratio of large members (real tensors compress ~1.1:1 and JSON ~5:1; a bomb ~1000:1).
MEMBER_LIMIT_ENV, TOTAL_LIMIT_ENV = "QDEBUG_MAX_MEMBER_BYTES", "QDEBUG_MAX_ARCHIVE_BYTES"
DEFAULT_MEMBER_LIMIT = 1024 * _MiB
DEFAULT_TOTAL_LIMIT = 4096 * _MiB
MAX_RATIO = 100
RATIO_CHECKED_FROM = 4 * _MiB  # small members may compress well (a JSON of zeros); only large ones are suspect
MAX_MEMBERS = 100_000
_CHUNK = 1 * _MiB


def _limit(env: str, default: int) -> int:
    """A limit in bytes from its environment variable (a bad value is a one-line error naming it: qdebug.env)."""
    from qdebug.env import env_int

    return env_int(env, default, unit="bytes")


def member_limit() -> int:
    """The largest uncompressed member read (QDEBUG_MAX_MEMBER_BYTES, default 1 GiB)."""
    return _limit(MEMBER_LIMIT_ENV, DEFAULT_MEMBER_LIMIT)


def _human(n: int) -> str:
    return f"{n / _MiB:,.1f} MiB" if n >= _MiB else f"{n:,} bytes"


class SafeZip:
    """A zip opened for reading with limits; every refusal is a TraceFormatError naming the file and member."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = path, what
        try:
            self.zf = zipfile.ZipFile(path)
            infos = self.zf.infolist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise TraceFormatError(f"{path}: not a {what} ({type(exc).__name__}); expected a zip written by qdebug") from None
        if len(infos) > MAX_MEMBERS:
            raise TraceFormatError(f"{path}: {len(infos):,} zip members (expected at most {MAX_MEMBERS:,}); not a {what}")
        total = sum(i.file_size for i in infos)
        total_limit = _limit(TOTAL_LIMIT_ENV, DEFAULT_TOTAL_LIMIT)
        if total > total_limit:
            raise TraceFormatError(
                f"{path}: members would expand to {_human(total)} (expected at most {_human(total_limit)}; "
                f"raise {TOTAL_LIMIT_ENV} for a larger {what})"
            )
        self.infos = {i.filename: i for i in infos}

    def __enter__(self) -> "SafeZip":
        return self

    def __exit__(self, *exc) -> None:
        self.zf.close()

    def names(self) -> list[str]:
        """Member names in archive order."""
        return list(self.infos)

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = self.infos.get(name)
        if info is None:
            raise TraceFormatError(f"{self.path}: member {name} is missing; not a {self.what}")
        limit = member_limit()
        if info.file_size > limit:
            raise TraceFormatError(
                f"{self.path}: member {name} would expand to {_human(info.file_size)} (expected at most {_human(limit)}; "
                f"raise {MEMBER_LIMIT_ENV} for a larger {self.what})"
            )
        if info.file_size > RATIO_CHECKED_FROM and info.file_size > MAX_RATIO * max(1, info.compress_size):
            raise TraceFormatError(
                f"{self.path}: member {name} expands {info.file_size / max(1, info.compress_size):,.0f}:1 "
                f"({_human(info.compress_size)} to {_human(info.file_size)}); expected at most {MAX_RATIO}:1 (a zip bomb?)"
            )
        return info

    def _stream(self, name: str, out) -> int:
        """Copy a member into `out`, stopping past its declared size (a header that lies is caught here)."""
        info = self._info(name)
        cap = info.file_size
        done = 0
        try:
            with self.zf.open(info) as src:
                while chunk := src.read(_CHUNK):
                    done += len(chunk)
                    if done > cap:
                        raise TraceFormatError(f"{self.path}: member {name} holds more than its declared {_human(cap)}; corrupt")
                    out.write(chunk)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
            # zlib errors, CRC mismatches, encrypted members, unknown compression methods
            raise TraceFormatError(f"{self.path}: member {name} is corrupt ({type(exc).__name__}); not a {self.what}") from None
        return done

    def read(self, name: str) -> bytes:
        """A member's bytes (within the limits)."""
        import io

        buf = io.BytesIO()
        self._stream(name, buf)
        return buf.getvalue()

    def extract(self, name: str, target: Path) -> Path:
        """Stream a member to `target` (within the limits) without holding it in memory."""
        with open(target, "wb") as out:
            self._stream(name, out)
        return target

