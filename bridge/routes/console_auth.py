"""Who may open the console: operators of the configuration, by a session cookie or a bearer token.

An operator signs in with its token or password (``POST /console/login``), checked against every
operator's SHA-256 in constant time (:func:`~messages.tokens.matching_index`). Signing in opens a
session: a random id in an HttpOnly, SameSite=Strict cookie, of which the node keeps only the
SHA-256, for :data:`SESSION_SECONDS`. A script sends ``Authorization: Bearer <operator token>``
instead. Nothing here logs, raises with or keeps a secret.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from starlette.requests import Request

from bridge.auth import bearer_token
from core.settings import Operator
from messages.tokens import matching_index, new_token, token_hash

__all__ = ["COOKIE", "MAX_SESSIONS", "SESSION_SECONDS", "OperatorSession", "Operators"]

COOKIE = "kitsune_console"
"""The name of the console's session cookie (its path is ``/console``)."""
SESSION_SECONDS = 8 * 3600.0
"""How long a console session lasts after signing in."""
MAX_SESSIONS = 1000
"""Sessions kept at most; past it, the oldest ends."""


@dataclass(frozen=True, slots=True)
class OperatorSession:
    """An operator's signed-in session: whose, and until when (on the monotonic clock)."""

    operator: str
    expires_at: float
    digest: bytes = field(repr=False)
    """SHA-256 of the session id; the id itself is only in the operator's cookie."""


class Operators:
    """The operators of the configuration and their console sessions (on the node's loop)."""

    def __init__(self, operators: Sequence[Operator], clock: Callable[[], float] = time.monotonic) -> None:
        self._names = [operator.name for operator in operators]
        self._hashes = [operator.secret_sha256 for operator in operators]
        self._clock = clock
        self._sessions: OrderedDict[bytes, OperatorSession] = OrderedDict()

    @property
    def configured(self) -> bool:
        """Whether any operator is configured (without one, the console does not exist)."""
        return bool(self._names)

    def named(self, secret: str) -> str | None:
        """The operator whose token or password ``secret`` is (every hash compared), or None."""
        found = matching_index(secret, self._hashes) if secret else None
        return self._names[found] if found is not None else None

    def sign_in(self, operator: str) -> str:
        """Open a session for ``operator``; the session id for its cookie (given out once, never kept)."""
        self._sweep()
        session_id = new_token()
        session = OperatorSession(operator, self._clock() + SESSION_SECONDS, token_hash(session_id))
        self._sessions[session.digest] = session
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return session_id

    def sign_out(self, session_id: str | None) -> None:
        """End the session of ``session_id`` (nothing when there is none)."""
        if session_id:
            self._sessions.pop(token_hash(session_id), None)

    def of_session(self, session_id: str | None) -> str | None:
        """The operator signed in with ``session_id``, if its session is open (looked up by its SHA-256)."""
        session = self._sessions.get(token_hash(session_id)) if session_id else None
        if session is None or session.expires_at <= self._clock():
            return None
        return session.operator

    def of_request(self, request: Request) -> tuple[str | None, bool]:
        """The operator a request is from (its bearer token, else its session cookie), and whether it
        presented a bearer token that is no operator's. ``duplicate_header`` for two Authorization headers."""
        token = bearer_token(request.headers.getlist("authorization"))
        if token is not None:
            named = self.named(token)
            return named, named is None
        return self.of_session(request.cookies.get(COOKIE)), False

    def _sweep(self) -> None:
        now = self._clock()
        for digest in [d for d, session in self._sessions.items() if session.expires_at <= now]:
            del self._sessions[digest]
