"""qdebug's vLLM endpoint plugin (entry point `vllm.endpoint_plugins: qdebug = qdebug.engine.vllm_routes:QdebugRoutes`):
the trace folder over the server's own HTTP port, for a client on another machine.

vLLM loads endpoint plugins only when `VLLM_PLUGINS` names them (`VLLM_PLUGINS=qdebug`, which also selects the
general plugin of that name). Two read-only routes serve QDEBUG_VLLM_TRACE_DIR:
- `GET /qdebug/traces/index.jsonl`: the index;
- `GET /qdebug/traces/{name}.qdt`: one trace, by a name the index lists (no other path is reachable).
"""

from __future__ import annotations

import os
import re

from .trace_dir import INDEX

_NAME = re.compile(r"[A-Za-z0-9._-]+\.qdt")


class QdebugRoutes:
    """The endpoint plugin object vLLM instantiates: attaches the two routes."""

    name = "qdebug"
    required_tasks = None

    def attach_router(self, app) -> None:
        """Register the routes on vLLM's FastAPI app."""
        from fastapi import HTTPException
        from fastapi.responses import FileResponse

        def folder():
            root = os.environ.get("QDEBUG_VLLM_TRACE_DIR")
            if not root:
                raise HTTPException(404, "qdebug: tracing is off on this server (QDEBUG_VLLM_TRACE_DIR is not set)")
            return os.path.realpath(root)

        @app.get("/qdebug/traces/index.jsonl")
        def index():
            path = os.path.join(folder(), INDEX)
            if not os.path.isfile(path):
                raise HTTPException(404, "qdebug: no trace written yet")
            return FileResponse(path, media_type="application/jsonl")

        @app.get("/qdebug/traces/{name}")
        def trace(name: str):
            root = folder()
            path = os.path.realpath(os.path.join(root, name))
            if not _NAME.fullmatch(name) or name.startswith(".") or os.path.dirname(path) != root or not os.path.isfile(path):
                raise HTTPException(404, f"qdebug: no trace named {name!r}")
            return FileResponse(path, media_type="application/zip")

    async def init_state(self, engine_client, state, args) -> None:
        """Nothing to set up: the routes read the folder."""
        return None
