"""qdebug's vLLM endpoint plugin (entry point `vllm.endpoint_plugins: qdebug = qdebug.engine.vllm_routes:QdebugRoutes`):
the trace folder over the server's own HTTP port, for a client on another machine.

vLLM loads endpoint plugins only when `VLLM_PLUGINS` names them (`VLLM_PLUGINS=qdebug`, which also selects the
general plugin of that name). Two read-only routes serve QDEBUG_VLLM_TRACE_DIR:
- `GET /qdebug/traces/index.jsonl`: the index;
- `GET /qdebug/traces/{name}.qdt`: one trace, by a name the index lists (no other path is reachable).
Both serve only files of the folder itself: an index that is a symbolic or hard link, or a trace whose real path
is elsewhere, is answered 404 (trace_dir.open_index, trace_dir.trace_in_folder).
"""

from __future__ import annotations

import os

from .batch_log import BATCH_LOG, BATCH_LOG_OLD
from .trace_dir import open_index, open_own, trace_in_folder


class QdebugRoutes:
    """The endpoint plugin object vLLM instantiates: attaches the routes."""

    name = "qdebug"
    required_tasks = None

    def attach_router(self, app) -> None:
        """Register the routes on vLLM's FastAPI app."""
        from fastapi import HTTPException
        from fastapi.responses import FileResponse, StreamingResponse

        def folder():
            root = os.environ.get("QDEBUG_VLLM_TRACE_DIR")
            if not root:
                raise HTTPException(404, "qdebug: tracing is off on this server (QDEBUG_VLLM_TRACE_DIR is not set)")
            return os.path.realpath(root)

        @app.get("/qdebug/traces/index.jsonl")
        def index():
            try:
                fd = open_index(folder())
            except FileNotFoundError:
                raise HTTPException(404, "qdebug: no trace written yet") from None
            except OSError:
                raise HTTPException(404, "qdebug: the trace folder's index.jsonl is not a file of the folder itself") from None
            return StreamingResponse(_chunks(fd), media_type="application/jsonl")

        @app.get("/qdebug/traces/batches.jsonl")
        def batches():
            return _own_file(folder(), BATCH_LOG)

        @app.get("/qdebug/traces/batches.1.jsonl")
        def batches_old():
            return _own_file(folder(), BATCH_LOG_OLD)

        def _own_file(root: str, name: str):
            try:
                fd = open_own(root, name)
            except FileNotFoundError:
                raise HTTPException(404, f"qdebug: no {name} yet") from None
            except OSError:
                raise HTTPException(404, f"qdebug: the trace folder's {name} is not a file of the folder itself") from None
            return StreamingResponse(_chunks(fd), media_type="application/jsonl")

        @app.get("/qdebug/traces/{name}")
        def trace(name: str):
            path = trace_in_folder(folder(), name, one_name=True)
            if path is None:
                raise HTTPException(404, f"qdebug: no trace named {name[:200]!r}")
            return FileResponse(path, media_type="application/zip")

    async def init_state(self, engine_client, state, args) -> None:
        """Nothing to set up: the routes read the folder."""
        return None


def _chunks(fd: int, size: int = 1 << 16):
    """The bytes of an open file, a block at a time; the descriptor is closed at the end (or when the client leaves)."""
    with open(fd, "rb", closefd=True) as f:
        while block := f.read(size):
            yield block
