"""Continuations armed ahead: a top document that redeems its token runs the callback at once.

A redemption asked of the node costs the new document a round trip through the browser and Playwright's
driver, and the node's answer then waits for the renderer, which is busy loading that very document. So the
node arms each reserved token as it issues it: an init script of the token's tab hands every new top document
of the token's origin, until the token's lifetime ends, what redeeming it gives (the id of the invocation it
starts, the token that invocation may ask for, and the call's input), sealed with AES-256-GCM under the token
itself. Only a document that holds the token can open it; ``resumeTool`` opens it and runs the callback in
the same turn, and tells the node, which checks the redemption as it hears it (once, same tab, same origin,
within its lifetime, the agent's URL lists) and aborts the callback's signal if it refuses it. The node takes
the script out once the token is redeemed or dropped.

What the document checks itself (its own origin as the browser has it, that it is the top document, the
lifetime from the arming) refuses everything the node would; a document that committed in the few
milliseconds between a redemption and the script's removal may open it a second time, and is refused (and
aborted) by the node. A document in a frame, or one the script reached too late, asks the node as before.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAX_SEALED_BYTES", "armed_script", "token_key"]

MAX_SEALED_BYTES = 64 * 1024
"""Bytes of a sealed hand-off at most: a call whose input is larger is not armed (its documents ask the node)."""
_IV_BYTES = 12


def token_key(token: str) -> bytes:
    """The AES-256 key a continuation token is: its 32 random bytes (the page decodes it the same way)."""
    key = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    if len(key) != 32:
        raise ValueError("a continuation token that is armed has 32 random bytes")
    return key


def armed_script(token: str, origin: str, lifetime: float, hand_off: dict[str, Any]) -> str | None:
    """The init script that hands ``hand_off``, sealed under ``token``, to each new top document of ``origin`` for
    ``lifetime`` seconds from now (None when it is over :data:`MAX_SEALED_BYTES`). Nothing in it is the token or the
    hand-off in clear."""
    iv = os.urandom(_IV_BYTES)
    sealed = AESGCM(token_key(token)).encrypt(iv, json.dumps(hand_off, separators=(",", ":")).encode(), None)
    if len(sealed) > MAX_SEALED_BYTES:
        return None
    until = int((time.time() + lifetime) * 1000)
    arm = json.dumps([until, base64.b64encode(iv).decode(), base64.b64encode(sealed).decode()])[1:-1]
    return (f"(() => {{ if (window === window.top && location.origin === {json.dumps(origin)}) "
            f"globalThis[Symbol.for('kitsune.siteTools')]?.arm({arm}); }})();")
