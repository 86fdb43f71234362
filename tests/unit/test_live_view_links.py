"""Where a Live View link points: the configured public URL, else the host the asking request named."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from bridge.live.views import LiveViews, Pages
from bridge.policy import Policy, TabOwners
from messages.requests import Subjects


class _Pages:
    def tab_ids(self) -> frozenset[int]:
        return frozenset({3})


class _Auditor:
    def live_view(self, op: str, tab: int) -> None:
        return None


async def _here(tab: int) -> str:
    return "n1"


def _views(public_url: str | None) -> LiveViews:
    owners = TabOwners()
    owners.take_over(3, "alice")
    return LiveViews("n1", cast(Pages, _Pages()), Subjects(), owners, ttl=300.0, node_of=_here,
                     policy_of=lambda agent: Policy(), auditor=cast(Any, lambda agent: _Auditor()),
                     public_url=public_url)


def test_a_link_starts_with_the_public_url_whatever_host_the_request_named() -> None:
    link = asyncio.run(_views("https://kitsune.example.com").issue(3, "alice", "http://evil.example:1/"))
    assert link["url"].startswith("https://kitsune.example.com/live/3#t=") and link["expires_in"] == 300.0


def test_without_one_a_link_starts_with_the_requests_base_url() -> None:
    link = asyncio.run(_views(None).issue(3, "alice", "http://127.0.0.1:8000/"))
    assert link["url"].startswith("http://127.0.0.1:8000/live/3#t=")
