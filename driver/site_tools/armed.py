"""Continuations armed ahead: a top document that redeems its token runs the callback at once.

A redemption asked of the node costs the new document a round trip through the browser and Playwright's
driver, and the node's answer then waits for the renderer, which is busy loading that very document. So the
node arms a chain's tokens ahead, before the tool runs: one init script of the tab hands every new top document
of the tokens' origin, until their lifetime ends, what redeeming each gives (the id of the invocation it starts,
the token that invocation may ask for, and the call's input), sealed with AES-256-GCM under the token itself:
the token the first invocation holds, the one the invocation its redemption starts will hold, and so on for a
few documents (a longer chain gets another script as it gets there). Only a document that holds a token can
open its hand-off; ``resumeTool`` opens it and runs the callback in the same turn, and tells the node, which
checks the redemption as it hears it (once, same tab, same origin, within its lifetime, the agent's URL lists)
and aborts the callback's signal if it refuses it. The script is taken out as the call ends; no command goes
to the tab while the chain's documents load.

What the document checks itself (its own origin as the browser has it, that it is the top document, the lifetime
from the arming) refuses what the node would but for one case: a second document that opens a token's hand-off
while the call still runs (the page itself went back to a redeemed token's URL) runs its callback, which the node
refuses and aborts as it hears it. A document in a frame, or one past what was armed, asks the node as before.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAX_SEALED_BYTES", "armed_script", "token_key"]

MAX_SEALED_BYTES = 192 * 1024
"""Bytes of one script's sealed hand-offs at most: a call whose input is larger is not armed (its documents ask the
node)."""
_IV_BYTES = 12


def token_key(token: str) -> bytes:
    """The AES-256 key a continuation token is: its 32 random bytes (the page decodes it the same way)."""
    key = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    if len(key) != 32:
        raise ValueError("a continuation token that is armed has 32 random bytes")
    return key


def armed_script(origin: str, lifetime: float, hand_offs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """The init script that hands each of ``hand_offs`` (a token and what redeeming it gives), sealed under its token,
    to each new top document of ``origin`` for ``lifetime`` seconds from now (None when they are over
    :data:`MAX_SEALED_BYTES`). Nothing in it is a token or a hand-off in clear."""
    until = int((time.time() + lifetime) * 1000)
    arms, size = [], 0
    for token, hand_off in hand_offs:
        iv = os.urandom(_IV_BYTES)
        sealed = AESGCM(token_key(token)).encrypt(iv, json.dumps(hand_off, separators=(",", ":")).encode(), None)
        size += len(sealed)
        fields = [until, base64.b64encode(iv).decode(), base64.b64encode(sealed).decode()]
        arms.append(f"arm({json.dumps(fields)[1:-1]});")
    if size > MAX_SEALED_BYTES:
        return None
    return (f"(() => {{ const arm = globalThis[Symbol.for('kitsune.siteTools')]?.arm; if (arm && window === window.top "
            f"&& location.origin === {json.dumps(origin)}) {{ {' '.join(arms)} }} }})();")
