"""One exception root for every error Kitsune answers, with its data in attributes.

An error reaches the caller as ``{"error", "code", "retryable", "state"?}`` with the HTTP
status of its code (spec: Errors). Messages never carry typed values, JavaScript bodies,
stored results or tokens: they name paths, parameters and codes only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ERROR_CODES", "UNKNOWN_CODE_STATUS", "ErrorCode", "KitsuneError", "invalid_call"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One error code of the contract (spec: Errors)."""

    name: str
    """The machine-readable code."""
    http_status: int
    """The HTTP status a :class:`KitsuneError` of this code answers with. A code that travels only
    inside a result (a step's failure) is answered with its call's status; this is its status if raised."""
    retryable: bool
    """Whether sending the same request again may succeed, when the error does not say."""


def _codes(http_status: int, retryable: bool, *names: str) -> list[ErrorCode]:
    return [ErrorCode(name, http_status, retryable) for name in names]


ERROR_CODES: Mapping[str, ErrorCode] = {code.name: code for code in [
    # Bad calls: rejected whole before anything is sent.
    *_codes(400, False, "invalid_call", "unknown_action", "missing_parameter", "invalid_parameter",
            "unknown_parameter", "bad_reference", "empty_parallel", "too_deep", "too_many_commands",
            "invalid_workflow", "invalid_json", "duplicate_key", "duplicate_header", "invalid_content_type",
            "unknown_tab", "invalid_config", "unknown_tool", "unknown_node"),
    *_codes(413, False, "body_too_large"),
    # The caller.
    *_codes(401, False, "unauthorized"),
    *_codes(404, False, "capability_disabled", "workflow_not_found", "route_not_found"),
    *_codes(405, False, "method_not_allowed"),
    # Resume (spec: Errors).
    *_codes(404, False, "checkpoint_not_found"),
    *_codes(403, False, "resume_token_invalid"),
    *_codes(409, False, "workflow_changed", "current_tab_changed"),
    *_codes(400, False, "observed_invalid", "observed_required"),
    *_codes(200, False, "resume_failed"),
    # The node's own parts are not there (yet).
    *_codes(503, False, "nats_unavailable", "browser_unavailable", "bus_disconnected", "bus_error",
            "audit_unavailable"),
    *_codes(503, True, "tabs_unavailable", "tab_ids_unavailable", "no_responders", "events_unavailable",
            "bridge_unavailable", "fleet_full", "fleet_unavailable"),
    *_codes(504, False, "bus_timeout", "bridge_timeout"),
    *_codes(502, False, "bridge_error"),
    *_codes(502, False, "invalid_message"),  # another node refused what this one sent it (``messages.wire``)
    # A step's failure, answered inside its call's result.
    *_codes(400, False, "reference_unresolved", "no_tab", "tab_closed", "ambiguous_selector", "invalid_selector",
            "wrong_element", "not_select", "no_form", "invalid_form", "js_error", "js_syntax_error",
            "max_iterations", "storage_full", "storage_unavailable", "not_applied", "cdp_error"),
    *_codes(400, True, "not_found", "not_actionable", "not_editable", "option_not_found"),
    *_codes(403, False, "read_only", "url_denied", "needs_user", "confirm_token_invalid", "cdp_method_refused"),
    *_codes(409, False, "tab_owned", "tab_claimed"),
    *_codes(409, True, "navigated", "skipped", "stale_ref"),
    *_codes(502, False, "download_failed", "storage_failed"),
    *_codes(502, True, "navigation_failed"),
    *_codes(504, False, "container_timeout"),
    *_codes(504, True, "timeout", "barrier_timeout"),
    *_codes(500, False, "internal", "internal_error", "browser_error"),
    *_codes(503, False, "node_stopped"),
    # Sessions (the browser contexts of an agent's tabs).
    *_codes(410, False, "session_expired"),
    *_codes(404, False, "session_not_found"),
    *_codes(409, False, "session_exists", "session_not_promotable"),
    *_codes(409, False, "persistence_not_configured", "session_state_refused"),  # persistent sessions (issue 34)
    *_codes(413, False, "session_state_too_large"),
    *_codes(503, True, "session_state_unavailable"),
    # Live View (a person's connection to a tab; its refusals are also WebSocket close codes).
    *_codes(403, False, "live_view_disabled", "live_view_token_invalid", "live_view_expired", "live_view_wrong_tab",
            "live_view_wrong_mode"),
    *_codes(409, False, "live_view_controlled"),
    *_codes(403, False, "live_view_revoked", "live_view_read_only"),
    *_codes(429, True, "live_view_quota", "live_view_input_rate"),
    *_codes(503, True, "node_unavailable"),
    *_codes(503, False, "node_stopping"),
    *_codes(503, True, "node_draining"),  # the node is leaving the fleet (a drain): another node takes the call
    *_codes(200, False, "handed_back", "viewer_gone"),
    # Site tools (the WebMCP tools a page declares) and their continuation tokens.
    *_codes(404, False, "site_tool_not_found"),
    *_codes(400, False, "invalid_input"),
    *_codes(422, False, "invalid_schema"),  # the page's schema is unusable: not the agent's input, not retryable
    *_codes(409, False, "continuation_expired", "site_tool_error"),
    *_codes(403, False, "site_tool_writes"),  # a call tried as a read whose tool is no read: the policy answers
    # Tasks (issue 17): a task's lease, its takeover, its tabs.
    *_codes(400, False, "session_required"),
    *_codes(404, False, "task_not_found"),
    *_codes(409, False, "task_leased", "task_expired", "task_takeover_conflict", "task_closed", "task_conflict",
            "task_origin_changed"),
    *_codes(410, False, "task_revoked"),
    # A ``remote`` task's authority, the host's (issue 33): not configured, not answering, or a newer revision.
    *_codes(501, False, "task_authority_not_configured"),
    *_codes(503, True, "task_authority_unavailable"),
    *_codes(409, True, "task_authority_conflict"),
    *_codes(403, False, "takeover_denied"),  # an operator denied a held takeover (bridge.tasks.held)
    *_codes(404, False, "hold_not_found"),
    # The operator console.
    *_codes(404, False, "console_off"),
    *_codes(403, False, "forbidden"),
    *_codes(429, True, "login_rate_limited"),
    *_codes(429, False, "quota_exceeded"),
]}
"""Every code Kitsune raises or answers, by name; a unit test finds each code literal of the package here."""

UNKNOWN_CODE_STATUS = 500
"""A code missing from :data:`ERROR_CODES` is a server bug: it answers 500, with a warning logged."""


class KitsuneError(Exception):
    """An error answered to the caller; ``code`` says what, ``state`` gives the details."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        """Machine-readable error code (spec: Errors)."""
        self.message = message
        """What went wrong, for a person; never holds a secret."""
        known = ERROR_CODES.get(code)
        self.retryable = retryable if retryable is not None else known is not None and known.retryable
        """Whether sending the same request again may succeed (by default, as its code says)."""
        self.state = dict(state) if state is not None else None
        """Details the caller can act on (paths, steps, tabs)."""

    @property
    def http_status(self) -> int:
        """The HTTP status this error is answered with: its code's, or 500 (logged) for an unknown code."""
        known = ERROR_CODES.get(self.code)
        if known is None:
            _log.warning("error code %r is not in messages.errors.ERROR_CODES: answered %d", self.code,
                         UNKNOWN_CODE_STATUS)
            return UNKNOWN_CODE_STATUS
        return known.http_status

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
