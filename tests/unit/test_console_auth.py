"""The console's operators: secrets checked by hash, sessions kept as hashes for 8 hours, bearer tokens."""

from __future__ import annotations

from starlette.requests import Request

from bridge.routes.console_auth import COOKIE, MAX_SESSIONS, SESSION_SECONDS, Operators
from core.settings import Operator
from messages.tokens import token_hash

TOKEN = "operator-token-0123456789abcdef"
PASSWORD = "night-shift-password"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def operators(clock: Clock | None = None) -> Operators:
    return Operators([Operator("sre", token_hash(TOKEN)), Operator("night", token_hash(PASSWORD))],
                     clock or Clock())


def request(*headers: tuple[str, str]) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/console/state", "query_string": b"",
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers]})


def test_a_secret_names_its_operator_and_nothing_else_does() -> None:
    ops = operators()
    assert (ops.named(TOKEN), ops.named(PASSWORD)) == ("sre", "night")
    assert [ops.named(s) for s in ("", TOKEN[:-1], TOKEN + " ", PASSWORD.upper())] == [None] * 4
    assert ops.configured and not Operators([]).configured


def test_a_session_lasts_eight_hours_is_kept_as_a_hash_and_ends_at_sign_out() -> None:
    clock = Clock()
    ops = operators(clock)
    session_id = ops.sign_in("sre")
    assert len(session_id) >= 32 and ops.of_session(session_id) == "sre"
    assert session_id not in repr(vars(ops)) and repr(token_hash(session_id)) in repr(vars(ops))
    assert [ops.of_session(s) for s in (None, "", session_id[:-1])] == [None, None, None]
    clock.now += SESSION_SECONDS - 1
    assert ops.of_session(session_id) == "sre"
    clock.now += 1
    assert ops.of_session(session_id) is None
    again = ops.sign_in("sre")
    ops.sign_out(again)
    assert ops.of_session(again) is None


def test_sessions_past_the_most_kept_end_the_oldest_first() -> None:
    ops = operators()
    first = ops.sign_in("sre")
    later = [ops.sign_in("night") for _ in range(MAX_SESSIONS)]
    assert ops.of_session(first) is None and ops.of_session(later[0]) == "night"


def test_a_request_is_an_operators_by_its_bearer_token_or_its_cookie() -> None:
    ops = operators()
    session_id = ops.sign_in("night")
    assert ops.of_request(request(("Authorization", f"Bearer {TOKEN}"))) == ("sre", False)
    assert ops.of_request(request(("Authorization", "Bearer not-an-operator-token"))) == (None, True)
    assert ops.of_request(request(("Cookie", f"{COOKIE}={session_id}"))) == ("night", False)
    assert ops.of_request(request(("Cookie", f"{COOKIE}=forged"))) == (None, False)
    assert ops.of_request(request()) == (None, False)
