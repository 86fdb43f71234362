"""One exception root for every error Kitsune answers, with its data in attributes.

An error reaches the caller as ``{"error", "code", "retryable", "state"?}`` with the HTTP
status of its code (spec: Errors). Messages never carry typed values, JavaScript bodies,
stored results or tokens: they name paths, parameters and codes only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["HTTP_STATUS", "KitsuneError", "invalid_call"]

HTTP_STATUS: Mapping[str, int] = {
    # Bad calls: rejected whole before anything is sent.
    "invalid_call": 400,
    "unknown_action": 400,
    "missing_parameter": 400,
    "invalid_parameter": 400,
    "unknown_parameter": 400,
    "bad_reference": 400,
    "empty_parallel": 400,
    "too_deep": 400,
    "too_many_commands": 400,
    "invalid_workflow": 400,
    "invalid_json": 400,
    "duplicate_key": 400,
    "duplicate_header": 400,
    "invalid_content_type": 400,
    "body_too_large": 413,
    "unknown_tab": 400,
    "invalid_config": 400,
    # The caller.
    "unauthorized": 401,
    "capability_disabled": 404,
    "workflow_not_found": 404,
    # Resume (spec: Errors).
    "checkpoint_not_found": 404,
    "resume_token_invalid": 403,
    "workflow_changed": 409,
    "observed_invalid": 400,
    "observed_required": 400,
    "resume_failed": 200,
    # The node's own parts are not there (yet): try again later.
    "nats_unavailable": 503,
    "browser_unavailable": 503,
    "tabs_unavailable": 503,
    "bus_disconnected": 503,
    "bus_error": 503,
    "no_responders": 503,
    "bus_timeout": 504,
    "events_unavailable": 503,
    "audit_unavailable": 503,
}


class KitsuneError(Exception):
    """An error answered to the caller; ``code`` says what, ``state`` gives the details."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        """Machine-readable error code (spec: Errors)."""
        self.message = message
        """What went wrong, for a person; never holds a secret."""
        self.retryable = retryable
        """Whether sending the same request again may succeed."""
        self.state = dict(state) if state is not None else None
        """Details the caller can act on (paths, steps, tabs)."""

    @property
    def http_status(self) -> int:
        """The HTTP status this error is answered with."""
        return HTTP_STATUS.get(self.code, 400)

    def to_json(self) -> dict[str, Any]:
        """The error's wire form: ``{"error", "code", "retryable", "state"?}``."""
        body: dict[str, Any] = {"error": self.message, "code": self.code, "retryable": self.retryable}
        if self.state is not None:
            body["state"] = self.state
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KitsuneError:
        """Parse an error's wire form back."""
        return cls(data["code"], data["error"], retryable=data["retryable"], state=data.get("state"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KitsuneError) and self.to_json() == other.to_json()

    __hash__ = Exception.__hash__

    def __repr__(self) -> str:
        return f"KitsuneError({self.code!r}, {self.message!r})"


def invalid_call(code: str, path: str, message: str, **state: Any) -> KitsuneError:
    """A bad call, rejected whole; the message and ``state.path`` name the bad command."""
    where = f"command {path}" if path else "call"
    return KitsuneError(code, f"{where}: {message}", state={"path": path, **state})
