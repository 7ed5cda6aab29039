"""Run as a script under AddressSanitizer: the native log pass (built with ASan at argv[1]) over random and mutated
chunks, each in a buffer of its exact size (malloc'd, so a read one byte past its end is reported). Prints `ok N`."""

from __future__ import annotations

import ctypes
import importlib.util
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from qdebug.replay.formats import log_columns  # noqa: E402
from tests.logs.test_scan_block_matches_lines import BODIES, IDS, LEVELS, NUMS, STAMPS  # noqa: E402

PIECES = [b"request_id=", b"request_id", b"wrote", b"first", b"consumed", b"TokenStreamDesync", b"VisualEmbeddingShapeMismatch",
          b"CrossAttentionIndexOutOfBounds", b" (request_id=", b")", b" ", b"\r", b":", b"-", b"9" * 20, b"x", b"\xff",
          b" (previously ", b" with ", b" tokens", b"2024-07-12T14:23:07", b".", b"Z ", b"DEBUG ", b"\t", b"\x0b",
          b"VisualEncoder::write_buffer: request_id=", b" overwrote buffer at offset ", b": visual token offset ",
          b" differs from textual offset ", b": token index ", b" exceeds sequence length "]


def main(path: str, seed: int, rounds: int) -> None:
    spec = importlib.util.spec_from_file_location("_logscan", path)
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
    rng = random.Random(seed)

    def line() -> bytes:
        roll = rng.random()
        if roll < 0.5:  # a shape of ours, maybe cut or with a byte changed
            body = rng.choice(BODIES).format(rid=rng.choice(IDS), n=rng.choice(NUMS), m=rng.choice(NUMS))
            text = f"{rng.choice(STAMPS)} {rng.choice(LEVELS)} {body}".encode()
            if rng.random() < 0.5:
                k = rng.randrange(len(text))
                text = text[:k] + bytes([rng.randrange(256)]) * rng.randrange(3) + text[k + rng.randrange(3):]
        elif roll < 0.8:  # pieces of shapes, in any order
            text = b"".join(rng.choice(PIECES) for _ in range(rng.randrange(12)))
        elif roll < 0.98:
            text = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        else:  # long: a shape's piece repeated (the adversarial lines of test_04)
            text = rng.choice(PIECES) * rng.randrange(1, 4000)
        return text.replace(b"\n", b"")

    lines = 0
    for _ in range(rounds):
        data = b"\n" + b"\n".join(line() for _ in range(rng.randrange(1, 30))) + b"\n"
        ptr = libc.malloc(len(data))
        ctypes.memmove(ptr, data, len(data))
        try:
            buf = (ctypes.c_char * len(data)).from_address(ptr)
            lines += native.scan_block(memoryview(buf), len(data), log_columns._NATIVE_KINDS, rng.choice([16, 64, 1 << 20]))[0]
        finally:
            libc.free(ptr)
    print(f"ok {lines}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
