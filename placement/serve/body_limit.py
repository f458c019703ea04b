"""The cap on request bodies (``MAX_BODY_BYTES``, 1 MiB), as plain ASGI middleware: a
body declared larger (``Content-Length``) is answered 413 before a byte of it is read,
and a body sent without a length (chunked) is cut off with the same 413 as soon as it
passes the cap, so no request makes the server hold more than the cap in memory.
"""
from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from placement.serve.errors import Rejected

__all__ = ["BodyLimit", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 1 << 20

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    """Wraps an ASGI app; ``max_bytes`` is the largest body accepted."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], max_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _answer(send, self._too_large(f"the body declares {int(declared)} bytes"))
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise self._too_large("the body sent so far passes it")
            return message
        await self.app(scope, limited, send)

    def _too_large(self, what: str) -> Rejected:
        return Rejected(413, f"request body too large: {what}; the limit is {self.max_bytes} bytes")


async def _answer(send: Send, error: Rejected) -> None:
    body = json.dumps(error.body()).encode("utf-8")
    await send({"type": "http.response.start", "status": error.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
