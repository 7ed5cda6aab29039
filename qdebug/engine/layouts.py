"""Row layouts inside vLLM: its kernels take one request's q/k/v as [tokens, heads × dim] rows (token-major, the
flattened [B, T, H, D]); a buffer filled head-first ([H, T, D], seed 001's bug) and read token-major scrambles them.
`head_first` makes that reading, `read_layout` tells which of the two a kernel's input is, from the tensors alone."""

from __future__ import annotations

TOKEN_MAJOR, HEAD_FIRST, UNKNOWN = "token-major", "head-first", "unknown"
SAME = 1e-2  # relative distance under which two row blocks are the same (a bf16 recomputation stays well inside)


def head_first(rows, heads: int):
    """`rows` ([N, heads × D], token-major) as a kernel reads them when they were laid out [heads, N, D]."""
    n = rows.shape[0]
    return rows.reshape(n, heads, -1).transpose(0, 1).reshape(n, -1)


def read_layout(given, reference, heads: int) -> str:
    """Whether `given` (a kernel's input) is `reference` (the projection's own rows), their head-first reading, or
    neither. A single row reads the same both ways: token-major."""
    if _close(given, reference):
        return TOKEN_MAJOR
    if given.shape[0] > 1 and _close(given, head_first(reference, heads)):
        return HEAD_FIRST
    return UNKNOWN


def _close(a, b) -> bool:
    a, b = a.float(), b.float()
    return a.shape == b.shape and float((a - b).norm()) <= SAME * float(b.norm()) + 1e-12
