"""A session's name as the contract gives it: a reuse name chosen by its agent, or a call's one-shot
session, ``call:<id>`` (no reuse name holds a colon), which a ``newTab`` asks for as ``"call"``."""

from __future__ import annotations

import re

__all__ = ["ONE_SHOT", "names_one_shot", "one_shot_call", "one_shot_name"]

ONE_SHOT = "call"
"""The name a ``newTab`` gives for a fresh one-shot session of its call."""
_ONE_SHOT_NAME = re.compile(r"call:(\d+)")


def one_shot_name(call: int) -> str:
    """The name of a call's one-shot session."""
    return f"call:{call}"


def one_shot_call(name: str) -> int | None:
    """The call whose one-shot session ``name`` is, None for another name."""
    found = _ONE_SHOT_NAME.fullmatch(name)
    return int(found.group(1)) if found else None


def names_one_shot(session: object) -> bool:
    """Whether ``session`` names a one-shot session: ``"call"``, or a call's ``"call:<id>"``."""
    return session == ONE_SHOT or (isinstance(session, str) and one_shot_call(session) is not None)
