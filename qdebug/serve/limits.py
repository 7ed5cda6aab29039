"""What `qdebug serve` accepts from clients: a body size limit (413), a cap on open connections (503) and a time by
which each request must have arrived whole (slow clients are cut off), each set by an option."""

from __future__ import annotations

import json
from dataclasses import dataclass

# Far above a chat body with a few large base64 images, far below what fills memory.
DEFAULT_MAX_BODY_MB = 64.0
# More than a replay burst opens (its default concurrency is 64); a flood of idle or slow connections is turned away.
DEFAULT_MAX_CONNECTIONS = 256
# Seconds for a request (headers and body) to arrive once its connection is open: a 64 MB body at 1 MB/s fits.
DEFAULT_REQUEST_TIMEOUT = 120.0


@dataclass(frozen=True)
class ClientLimits:
    """The limits one server applies (options --max-body-mb, --max-connections, --request-timeout)."""

    max_body_mb: float = DEFAULT_MAX_BODY_MB
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    @property
    def max_body_bytes(self) -> int:
        """--max-body-mb in bytes."""
        return int(self.max_body_mb * 2**20)


def _error_body(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind}}).encode()


class BodyLimit:
    """ASGI middleware: a body over the limit (announced, or counted as it arrives) is answered 413 and never held."""

    def __init__(self, app, limits: ClientLimits):
        self.app, self.limits = app, limits

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        cap = self.limits.max_body_bytes
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > cap:
            return await self._refuse(send, int(declared))
        chunks, size, more = [], 0, True
        while more:  # the whole body first (at most `cap` bytes), then the app reads it from memory
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                return await self._refuse(send, None)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    async def _refuse(self, send, declared: int | None) -> None:
        size = f"{declared:,} bytes" if declared is not None else "more bytes"
        body = _error_body(f"request body too large: {size}; this server accepts at most {self.limits.max_body_bytes:,} "
                           f"(--max-body-mb {self.limits.max_body_mb:g})", "request_too_large")
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def guarded_protocol(limits: ClientLimits):
    """uvicorn's h11 protocol class with a cap on open connections (503 to the ones over it) and a deadline by which
    each request must have arrived whole (the connection is closed, 408, when it has not)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                self._answer_and_close(transport, 503, "Service Unavailable",
                                       f"too many open connections ({limits.max_connections}, --max-connections); try again later")
                return
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request on this connection has the same time to arrive

        def _arm(self, grace: bool = False) -> None:
            self._grace = grace
            self._deadline = self.loop.call_later(limits.request_timeout, self._expire)

        def _expire(self) -> None:
            # IDLE: headers not complete; SEND_BODY: body not complete. DONE (being answered) is never cut off.
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                if self.conn.our_state is h11.IDLE:
                    self._answer_and_close(self.transport, 408, "Request Timeout",
                                           f"the request did not arrive whole within {limits.request_timeout:g} s (--request-timeout)")
                elif not self._grace:
                    # An answer is on its way before the body arrived (a 413 refusing it): closing now would cut it
                    # between its head and its body, so it gets one more period to finish (it closes the connection).
                    self._arm(grace=True)
                else:
                    self.transport.close()  # an answer the client does not read, or one still unfinished

        def connection_lost(self, exc) -> None:
            deadline = getattr(self, "_deadline", None)
            if deadline is not None:
                deadline.cancel()
            super().connection_lost(exc)

        @staticmethod
        def _answer_and_close(transport, status: int, reason: str, message: str) -> None:
            body = _error_body(message, "server_busy" if status == 503 else "request_timeout")
            head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
                    "connection: close\r\n\r\n").encode()
            transport.write(head + body)
            transport.close()

    return Guarded
