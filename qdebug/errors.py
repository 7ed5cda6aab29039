"""The QDebugError family: every expected failure, each with its CLI exit code."""

from __future__ import annotations


class QDebugError(Exception):
    """An expected failure with a one-line message for the user."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InputError(QDebugError):
    """A file or argument the user gave is missing, unreadable or malformed."""

    exit_code = 2


class ImageError(InputError):
    """An image is missing, corrupt or not an image."""


class PlaceholderError(InputError):
    """The prompt's image placeholders do not match the images given."""


class ModelLoadError(QDebugError):
    """`--model` does not name a loadable Qwen multimodal checkpoint."""

    exit_code = 3


class DeviceError(QDebugError):
    """The requested device or dtype is not available here."""

    exit_code = 4


class TraceFormatError(InputError):
    """A saved trace file is corrupt, of another version, or not a trace."""


class ReplayFormatError(InputError):
    """A capture or runtime log cannot be read at all."""


class IncompatibleTracesError(QDebugError):
    """Two traces do not describe the same request and model, so they cannot be compared."""

    exit_code = 5


class OutputError(InputError):
    """An output path (--json, --png, --save, ...) cannot be written: a folder, a read-only place, a full disk."""


class Interrupted(QDebugError):
    """Ctrl-C (exit 130) or SIGTERM (exit 143) arrived at a point where nothing had been written yet."""

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code

class ExportFormatError(InputError):
    """An ONNX export directory, its manifest/mapping file or a graph in it is not usable."""


class ExportMismatchError(QDebugError):
    """An ONNX export does not fit the model it is compared with."""

    exit_code = 5


class EngineTraceError(QDebugError):
    """A serving engine did not produce the trace asked for (plugin off, another trace folder, a timeout)."""

    exit_code = 1


class UnreachableError(QDebugError):
    """A server could not be connected to at all (refused, no route, unknown name, connect timeout): exit 6, apart
    from 1 (the runs differ or a problem was found), so a CI gate can tell a down server from a finding."""

    exit_code = 6


def describe(exc: BaseException) -> str:
    """An exception as the one line a user is shown: a qdebug error's own message, else `Type: text`."""
    return getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"


def text_lines(exc: BaseException) -> list[str]:
    """An exception's text as its non-empty, stripped lines, without terminal colour codes."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    return [line.strip() for line in text.splitlines() if line.strip()]


def cause(exc: BaseException) -> str:
    """The first line of an exception's text (its type's name when it has none), to put after a qdebug message."""
    lines = text_lines(exc)
    return lines[0] if lines else type(exc).__name__


def first_line(exc: BaseException) -> str:
    """An exception as `Type: first line of its text` (just `Type` when it has no text), for per-request errors."""
    lines = text_lines(exc)
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
