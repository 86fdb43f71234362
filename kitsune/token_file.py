"""Agent ``default``'s token file (``<state-dir>/token``), for a node configured with no agent.

A node that finds a valid token there (a regular file of its user's, readable by nobody else, one
token) keeps it as its own: a node already running may use it, and a node restarted keeps its
clients. It writes the file only once it serves, so a node that fails to start (its port in use)
changes nothing; and it never replaces a valid token another node wrote meanwhile: its own then
goes to ``token.<pid>``, and it says where.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from core.settings import Agent, Settings
from messages.tokens import token_hash

__all__ = ["kept_token", "publish_token"]

_TOKEN = re.compile(r"[A-Za-z0-9_.~+/=-]{16,512}")
"""What a token in the file may be: printable, no spaces, 16 to 512 characters."""


def kept_token(config: Settings, directory: Path) -> Settings:
    """``config``, whose generated token (if any) is replaced by the valid token of ``directory``'s file."""
    if config.generated_token is None:
        return config
    token = _valid_token(directory / "token")
    if token is None:
        return config
    return replace(config, agents=(Agent("default", token_hash(token)),), generated_token=token)


def publish_token(token: str, directory: Path) -> Path:
    """Write ``token`` to ``directory``'s token file (owner-only) unless it holds it already; the file
    that holds it: ``token.<pid>`` when another valid token is there (another node's)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "token"
    with _locked(directory / "token.lock"):
        current = _valid_token(path)
        if current == token:
            return path
        if current is not None:
            path = directory / f"token.{os.getpid()}"
        temporary = directory / f".token.{os.getpid()}"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(token + "\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    return path


def _valid_token(path: Path) -> str | None:
    """The token of ``path`` if it is a regular file of this user's that nobody else may read, holding one token."""
    try:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeError):
        return None
    return text if _TOKEN.fullmatch(text) else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two nodes starting at once write one after the other)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
