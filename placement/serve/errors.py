"""The one way a request is refused: :class:`Rejected`, an HTTP status with a message and
the field at fault.

Kept apart so that the service (which knows no web framework) and the HTTP layer raise
and render the same thing: every refusal reaches the client as
``{"error": "...", "field": "job.work_batches"}`` (``field`` null when the fault is the
request as a whole, such as a body that is not JSON).
"""
from __future__ import annotations

from typing import Any

__all__ = ["Rejected"]


class Rejected(Exception):
    """A request the service refuses, before it changed anything."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field

    def body(self) -> dict[str, Any]:
        """The JSON error body every refusal is sent as."""
        return {"error": self.message, "field": self.field}
