"""qdebug: a debugger for Qwen multimodal inference."""

import os

__version__ = "0.1.0"

# Arrow's C++ code (the Parquet writer and reader of the log index) allocates from its default pool, mimalloc unless
# this says otherwise, read once when pyarrow first allocates: mimalloc committed 20 MiB for the first Parquet file
# written and kept 25 MiB after the scan of a 10 M-line log, the peak 221 MiB against 198 with the system's malloc
# (the same CPU). Set before pyarrow is imported (qdebug is imported first), and never over the user's own choice.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
