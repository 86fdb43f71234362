"""Misspelt settings: ``KITSUNE_*`` variables that are no setting, and the key an unknown key was meant to be.

A ``KITSUNE_*`` variable is a setting (``KITSUNE_READ_ONLY``, ``KITSUNE_URLS__DENY``), one of the
variables with a meaning of their own (:data:`NOT_SETTINGS`, ``KITSUNE_TEST_*``), or a mistake.
pydantic-settings ignores a mistake at the top level silently (``KITSUNE_READONLY=1`` left writes
on): :func:`stray_variables` names each one, with the setting it is closest to, and
:func:`refused_variables` those close to a setting that guards something (:data:`GUARDS`), which
the node refuses to start with rather than run without the guard meant.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from kitsune.config_document import Document

__all__ = ["GUARDS", "NOT_SETTINGS", "closest", "closest_key", "refused_variables", "stray_variables"]

PREFIX = "KITSUNE_"
NOT_SETTINGS = frozenset({"KITSUNE_AGENTS", "KITSUNE_METRICS_TOKEN", "KITSUNE_CHROMIUM", "KITSUNE_TOKEN",
                          "KITSUNE_APPROVAL_WAIT", "KITSUNE_PERSIST_KEY", "KITSUNE_OPERATOR_TOKEN"})
"""Variables of their own meaning: agents and the scrape token (read with the settings), Chromium's path,
``kitsune mcp --bridge``'s token, the gateway's approval wait, the persistence key the shipped deploy files
name (``sessions.persist_key_env``), ``kitsune drain``'s operator token. ``KITSUNE_TEST_*`` are the tests'."""
GUARDS = ("read_only", "ask_before_act", "urls", "caps", "user_tabs_writable", "live_view", "operators",
          "agents", "metrics", "forwarded_allow_ips")
"""Settings that guard something: a variable close to one of them is refused, not ignored."""


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model class an annotation holds (through ``Annotated``, ``list`` and ``| None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for inner in typing.get_args(annotation):
        found = _model_in(inner)
        if found is not None:
            return found
    return None


def _setting_names() -> dict[str, str]:
    """Every setting's variable (``KITSUNE_URLS__DENY``) and its top-level key, and the other variables'."""
    names = {name: name.removeprefix(PREFIX).lower() for name in NOT_SETTINGS} | {
        "KITSUNE_METRICS_TOKEN": "metrics"}
    for key, info in Document.model_fields.items():
        names[f"{PREFIX}{key.upper()}"] = key
        section = _model_in(info.annotation)
        if section is not None and typing.get_origin(info.annotation) is not list:
            names.update({f"{PREFIX}{key.upper()}__{inner.upper()}": key for inner in section.model_fields})
    return names


_NAMES = _setting_names()


def _squashed(name: str) -> str:
    return name.removeprefix(PREFIX).replace("_", "").upper()


def closest(name: str, candidates: Sequence[str], cutoff: float = 0.8) -> str | None:
    """The candidate ``name`` is closest to (the same but for ``_`` and case, or a close spelling), or None."""
    squashed: dict[str, str] = {}
    for candidate in candidates:  # the first of two alike (KITSUNE_METRICS_TOKEN, KITSUNE_METRICS__TOKEN)
        squashed.setdefault(_squashed(candidate), candidate)
    if _squashed(name) in squashed:
        return squashed[_squashed(name)]
    found = difflib.get_close_matches(_squashed(name), list(squashed), n=1, cutoff=cutoff)
    return squashed[found[0]] if found else None


def _strays(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """Each ``KITSUNE_*`` variable that is no setting (nor a section's: pydantic checks those), with its closest."""
    strays = []
    for variable in sorted(env):
        name = variable.upper()
        if not name.startswith(PREFIX) or name in _NAMES or name.startswith(f"{PREFIX}TEST_"):
            continue
        if name.partition("__")[0] in _NAMES and "__" in name:
            continue  # inside a section: refused there as an unknown key
        strays.append((variable, closest(name, list(_NAMES))))
    return strays


def refused_variables(env: Mapping[str, str]) -> str | None:
    """Why the variables close to a guarding setting are refused (one line), or None when there is none."""
    refused = [f"{variable}: not a setting; did you mean {near}?" for variable, near in _strays(env)
               if near is not None and _NAMES[near] in GUARDS]
    if not refused:
        return None
    return "; ".join(refused) + " (refused: it is close to a setting that guards the node; correct or unset it)"


def stray_variables(env: Mapping[str, str]) -> list[str]:
    """A warning for each ``KITSUNE_*`` variable that is no setting (it is ignored)."""
    return [f"{variable} is not a setting and is ignored" + (f" (did you mean {near}?)" if near else "")
            for variable, near in _strays(env)]


def closest_key(location: Sequence[str | int]) -> str | None:
    """The known key an unknown one at ``location`` (``("agents", 1, "readonly")``) is closest to, or None."""
    model: type[BaseModel] | None = Document
    for part in location[:-1]:
        if isinstance(part, int):
            continue  # an item of a list: the list's model
        info = model.model_fields.get(part) if model is not None else None
        model = _model_in(info.annotation) if info is not None else None
    if model is None or isinstance(location[-1], int):
        return None
    near = closest(str(location[-1]), list(model.model_fields), cutoff=0.6)
    return near

