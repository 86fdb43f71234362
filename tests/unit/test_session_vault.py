"""Sealing a persistent session's state (``actors.session_vault``): AES-GCM bound to the fleet, agent and name."""

from __future__ import annotations

import pytest

from actors.session_vault import seal, unseal
from core.session_state import SavedState
from messages.contract import SESSION_STATE_MAX
from messages.errors import KitsuneError

KEY = "a-key-of-the-node-0123456789"
STATE = SavedState({"cookies": [{"name": "sid", "value": "the-secret-cookie"}], "origins": []},
                   ("http://shop.test",), 1_800_000_000.0)


def test_a_sealed_state_opens_with_its_key_for_its_agent_and_name_only() -> None:
    blob = seal(KEY, "fleet", "alice", "shop", STATE.to_bytes())
    assert b"the-secret-cookie" not in blob and b"sid" not in blob
    assert SavedState.from_bytes(unseal(KEY, "fleet", "alice", "shop", blob)) == STATE
    assert seal(KEY, "fleet", "alice", "shop", STATE.to_bytes()) != blob  # a nonce of its own each time
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    for key, fleet, agent, name, sealed in ((KEY + "x", "fleet", "alice", "shop", blob),
                                            (KEY, "other", "alice", "shop", blob),
                                            (KEY, "fleet", "bob", "shop", blob),
                                            (KEY, "fleet", "alice", "cart", blob),
                                            (KEY, "fleet", "alice", "shop", tampered),
                                            (KEY, "fleet", "alice", "shop", b"\x01short")):
        with pytest.raises(KitsuneError) as refused:
            unseal(key, fleet, agent, name, sealed)
        assert refused.value.code == "session_state_refused"
        assert "the-secret-cookie" not in str(refused.value)


def test_what_is_not_a_saved_state_is_refused() -> None:
    with pytest.raises(ValueError):
        SavedState.from_bytes(b'{"cookies": []}')
    assert "the-secret-cookie" not in repr(STATE)


def test_a_state_past_the_bound_is_not_sealed_and_says_so_without_its_contents() -> None:
    big = SavedState({"cookies": [], "origins": [{"origin": "http://shop.test", "localStorage": [
        {"name": "blob", "value": "the-secret-cookie" + "x" * SESSION_STATE_MAX}]}]}, ("http://shop.test",), 1.0)
    with pytest.raises(KitsuneError) as refused:
        seal(KEY, "fleet", "alice", "shop", big.to_bytes())
    assert (refused.value.code, refused.value.http_status) == ("session_state_too_large", 413)
    assert refused.value.state == {"session": "shop", "max": SESSION_STATE_MAX}
    assert "the-secret-cookie" not in str(refused.value)
