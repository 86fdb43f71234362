"""Persistent sessions' states in the fleet's JetStream, sealed (issue 34).

Each state is one key of the KV bucket ``KITSUNE_SESSIONS`` (history 1, replicas as
:func:`actors.jetstream.ensure_bucket` makes them): ``<fleet>.state.<agent>.<name>``, both digests.
Its value is sealed with AES-GCM (the ``cryptography`` package): a version byte, a random 96-bit
nonce, then the ciphertext and its tag. The 256-bit key is derived (HKDF-SHA256) from the node's
``sessions.persist_key``; the associated data names the fleet, the agent and the session, so a
blob copied under another agent's or session's key is refused, as is one sealed with another key.
Nothing here logs or raises a state's contents.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import TYPE_CHECKING

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from actors.buckets import sessions_bucket
from actors.fleet_registry import agent_key
from actors.jetstream import ensure_bucket
from core.session_state import SavedState
from messages.contract import SESSION_STATE_MAX
from messages.errors import KitsuneError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["SessionVault", "seal", "unseal"]

_VERSION = b"\x01"
_NONCE = 12
_DELETED = ("DEL", "PURGE")


@functools.lru_cache(maxsize=4)
def _aes(key: str) -> AESGCM:
    """The cipher of ``key`` (derived once per key, not per state; ``cryptography`` loaded then: a node whose sessions
    are never kept loads none)."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: PLC0415
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF  # noqa: PLC0415
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"kitsune session state v1")
    return AESGCM(derived.derive(key.encode()))


def _bound(fleet: str, agent: str, name: str) -> bytes:
    """The associated data of a state: whose it is."""
    return b"\0".join((b"kitsune-session-state", fleet.encode(), agent.encode(), name.encode()))


def seal(key: str, fleet: str, agent: str, name: str, plain: bytes) -> bytes:
    """``plain`` sealed for ``agent``'s session ``name``; ``session_state_too_large`` past :data:`SESSION_STATE_MAX`."""
    if len(plain) + 1 + _NONCE + 16 > SESSION_STATE_MAX:
        raise KitsuneError("session_state_too_large", f"The state of session {name!r} takes {len(plain)} bytes, more "
                           f"than the {SESSION_STATE_MAX} a persistent session may store: it was not saved",
                           state={"session": name, "max": SESSION_STATE_MAX})
    nonce = os.urandom(_NONCE)
    return _VERSION + nonce + _aes(key).encrypt(nonce, plain, _bound(fleet, agent, name))


def unseal(key: str, fleet: str, agent: str, name: str, blob: bytes) -> bytes:
    """What :func:`seal` sealed for that agent and session; ``session_state_refused`` for any other blob or key."""
    if blob[:1] != _VERSION or len(blob) < 1 + _NONCE + 16:
        raise _refused(name)
    cipher = _aes(key)
    from cryptography.exceptions import InvalidTag  # noqa: PLC0415 (loaded by the cipher)
    try:
        return cipher.decrypt(blob[1:1 + _NONCE], blob[1 + _NONCE:], _bound(fleet, agent, name))
    except InvalidTag:
        raise _refused(name) from None


def _refused(name: str) -> KitsuneError:
    return KitsuneError("session_state_refused", f"The stored state of session {name!r} cannot be opened with this "
                        "node's key for you (another key, or not your session's); close the session to drop it",
                        state={"session": name})


class SessionVault:
    """A :class:`core.session_state.StateStore` over the fleet's bucket (on the node's loop)."""

    def __init__(self, client: Client, fleet: str, key: str) -> None:
        self._client = client
        self._fleet = fleet
        self._key = key
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            try:
                self._kv = await ensure_bucket(self._client, sessions_bucket())
            except (nats.errors.Error, TimeoutError) as e:
                raise _unavailable(e) from e
        return self._kv

    def key_of(self, agent: str, name: str) -> str:
        """The bucket's key of ``agent``'s session ``name``."""
        return f"{self._fleet}.state.{agent_key(agent)}.{hashlib.sha256(name.encode()).hexdigest()[:32]}"

    async def save(self, agent: str, name: str, state: SavedState) -> int:
        blob = seal(self._key, self._fleet, agent, name, state.to_bytes())
        kv = await self._bucket()
        try:
            await kv.put(self.key_of(agent, name), blob)
        except (nats.errors.Error, TimeoutError) as e:
            raise _unavailable(e) from e
        return len(blob)

    async def load(self, agent: str, name: str) -> tuple[SavedState, int] | None:
        kv = await self._bucket()
        try:
            entry = await kv.get(self.key_of(agent, name))
        except nats.js.errors.KeyNotFoundError:
            return None
        except (nats.errors.Error, TimeoutError) as e:
            raise _unavailable(e) from e
        if not entry.value or entry.operation in _DELETED:
            return None
        plain = unseal(self._key, self._fleet, agent, name, entry.value)
        try:
            return SavedState.from_bytes(plain), len(entry.value)
        except ValueError:
            raise _refused(name) from None

    async def delete(self, agent: str, name: str) -> bool:
        kv = await self._bucket()
        key = self.key_of(agent, name)
        try:
            try:
                entry = await kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                return False
            if not entry.value or entry.operation in _DELETED:
                return False
            await kv.delete(key)
            return True
        except (nats.errors.Error, TimeoutError) as e:
            raise _unavailable(e) from e


def _unavailable(error: BaseException) -> KitsuneError:
    return KitsuneError("session_state_unavailable", f"The sessions' store did not answer ({type(error).__name__})",
                        retryable=True)
