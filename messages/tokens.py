"""Secret tokens, in one place: made with ``secrets``, kept as SHA-256, compared in constant time.

Only a token's SHA-256 is ever stored; a presented token is hashed and compared with
``hmac.compare_digest``. Nothing here logs, raises with or reprs a token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence

__all__ = ["TOKEN_BYTES", "digest", "digests_equal", "matching_index", "new_token", "token_hash", "token_matches"]

TOKEN_BYTES = 24
"""Random bytes in a resume or confirm token (spec: Checkpoints): 32 URL-safe characters."""


def new_token(nbytes: int = TOKEN_BYTES) -> str:
    """A new random token of ``nbytes`` bytes from ``secrets``, URL-safe."""
    return secrets.token_urlsafe(nbytes)


def digest(data: bytes) -> bytes:
    """SHA-256 of ``data``."""
    return hashlib.sha256(data).digest()


def token_hash(token: str) -> bytes:
    """SHA-256 of a token: the only form in which a token is kept."""
    return digest(token.encode())


def digests_equal(a: bytes, b: bytes) -> bool:
    """Whether two digests are equal, compared in constant time."""
    return hmac.compare_digest(a, b)


def token_matches(token: object, expected_sha256: bytes) -> bool:
    """Whether ``token`` is a string whose SHA-256 is ``expected_sha256`` (constant time)."""
    return isinstance(token, str) and digests_equal(token_hash(token), expected_sha256)


def matching_index(token: str, hashes: Sequence[bytes]) -> int | None:
    """Index of the hash ``token`` matches (the last, if several); every hash compared, in constant time each."""
    presented = token_hash(token)
    found = None
    for index, expected in enumerate(hashes):
        if digests_equal(presented, expected):
            found = index
    return found
