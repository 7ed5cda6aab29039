"""Freed heap memory handed back to the system between the phases of a log index build."""

from __future__ import annotations


def give_back_memory() -> None:
    """Return freed heap pages to the system (glibc's malloc_trim, Arrow's pool): peaks of successive phases do not add.
    Arrow and numpy free into glibc's heap, DuckDB into its own allocator: neither reuses what the other keeps."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:  # Arrow's C++ code allocates from its own default, mimalloc where the user chose it (qdebug/__init__): it keeps freed pages too
        pa.mimalloc_memory_pool().release_unused()
    except (AttributeError, NotImplementedError):  # a pyarrow built without mimalloc
        pass
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
        pass
