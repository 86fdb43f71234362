"""``remote`` tasks, kept by an authority the host supplies, over HTTP (the interface: docs/guides/tasks.md).

The node keeps in memory what :class:`~actors.task_store.LocalTaskStore` keeps (the mirror of the tasks it
read or wrote, the claims of their tabs) and asks the authority for each record: a read that decides is a
``GET``, a change a compare-and-set on the authority's revision (``PUT``), a change of the lease alone a
heartbeat. Every request carries the configured credential (``Authorization: Bearer``) and a deadline
(``X-Kitsune-Deadline``, Unix seconds) past which the authority must not apply it, and the node gives up at
the configured timeout; it follows no redirect and no proxy of its environment. It fails closed: an authority
that is slow, down, refuses the credential or answers outside the interface is ``task_authority_unavailable``
(503), a change refused for a newer revision each of its attempts is ``task_authority_conflict`` (409), and
nothing the authority did not acknowledge is remembered. The node never deletes a record there: completed and
revoked tasks are the authority's to keep or drop.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.task_store import SWEEP_EVERY, TOMBSTONE_TTL, LocalTaskStore, WriteConflict
from core.settings import TaskAuthority
from core.tasks import Task
from messages.errors import KitsuneError

if TYPE_CHECKING:
    import httpx

__all__ = ["DEADLINE_HEADER", "AuthorityTaskStore"]

DEADLINE_HEADER = "X-Kitsune-Deadline"
"""The Unix time after which the authority must not apply a request (the node has given up on it)."""


class AuthorityTaskStore(LocalTaskStore):
    """The ``remote`` tasks this node knows, each record the authority's."""

    def __init__(self, authority: TaskAuthority, *, clock: Callable[[], float] = time.time,
                 sweep_every: float = SWEEP_EVERY, tombstone_ttl: float = TOMBSTONE_TTL) -> None:
        super().__init__(clock=clock, sweep_every=sweep_every, tombstone_ttl=tombstone_ttl)
        self._authority = authority
        self._http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        import httpx  # noqa: PLC0415 (loaded where an authority is set: not by every node's start, where it took 6%)
        self._http = httpx.AsyncClient(base_url=self._authority.url, timeout=self._authority.timeout,
                                       trust_env=False, follow_redirects=False,
                                       headers={"Authorization": f"Bearer {self._authority.token}"})
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def create(self, task: Task) -> None:
        """Claim the tabs here first, then create the record at the authority: a creation it does not acknowledge
        leaves nothing held."""
        try:
            for tab in sorted(task.tabs):
                await self._claim_tab(tab, task)
            revision = await self._write(task, None)
        except BaseException as e:
            await self._drop_claims(task)
            if isinstance(e, WriteConflict):
                raise KitsuneError("task_conflict", f"task {task.id} exists", state={"taskId": task.id}) from None
            raise
        self._remember(task, revision)

    async def _read(self, task_id: str) -> tuple[Task, int] | None:
        response = await self._request("GET", f"/tasks/{task_id}")
        if response.status_code == 404:
            return None
        body = _answer(response, 200)
        try:
            task, revision = Task.from_dict(body["task"]), int(body["revision"])
        except (KeyError, TypeError, ValueError):
            raise _unavailable("answered a record that is not a task") from None
        if task.id != task_id:
            raise _unavailable("answered another task's record")
        return task, revision

    async def _write(self, task: Task, revision: int | None) -> int:
        if revision is None:
            response = await self._request("POST", "/tasks", {"task": task.to_dict()})
        elif self._lease_only(task, revision):
            response = await self._request("POST", f"/tasks/{task.id}/heartbeat", {
                "revision": revision, "lease_expires": task.lease_expires, "updated": task.updated})
        else:
            response = await self._request("PUT", f"/tasks/{task.id}", {"task": task.to_dict(), "revision": revision})
        if response.status_code == 409 or (response.status_code == 404 and revision is not None):
            raise WriteConflict  # a newer revision, or the record gone: read again
        try:
            return int(_answer(response, 200 if revision is not None else 201)["revision"])
        except (KeyError, TypeError, ValueError):
            raise _unavailable("answered no revision") from None

    async def _remove(self, task_id: str, revision: int) -> None:
        """Forget the task here only: its record is the authority's to keep or drop."""
        await self._delete(self._mirror, task_id, revision)

    def _lease_only(self, task: Task, revision: int) -> bool:
        """Whether ``task`` differs from the record known at ``revision`` by its lease alone (a heartbeat)."""
        known = self._mirror.get(task.id)
        return known is not None and known[1] == revision and dataclasses.replace(
            known[0], lease_expires=task.lease_expires, updated=task.updated) == task

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        """One request, given up at the timeout; the authority not answering as ``task_authority_unavailable``."""
        if self._http is None:
            raise _unavailable("is not connected (the node is not started)")
        import httpx  # noqa: PLC0415 (loaded by start)
        deadline = self._clock() + self._authority.timeout
        try:
            return await self._http.request(method, path, json=body, headers={DEADLINE_HEADER: f"{deadline:.3f}"})
        except httpx.TimeoutException as e:
            raise _unavailable(f"did not answer within {self._authority.timeout:g} s") from e
        except httpx.HTTPError as e:
            raise _unavailable(f"could not be reached ({type(e).__name__})") from e

    def _lost_race(self, task_id: str) -> KitsuneError:
        return KitsuneError("task_authority_conflict", f"the task authority answered a newer revision of task "
                            f"{task_id} each time: nothing was written; read it again", state={"taskId": task_id},
                            retryable=True)


def _answer(response: httpx.Response, expected: int) -> dict[str, Any]:
    """The JSON object ``response`` carries, when its status is ``expected``."""
    if response.status_code in (401, 403):
        raise _unavailable(f"refused the node's credential (HTTP {response.status_code})")
    if response.status_code != expected:
        raise _unavailable(f"answered HTTP {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise _unavailable("answered what is not a JSON object")
    return body


def _unavailable(why: str) -> KitsuneError:
    """The authority failed the node: nothing was written (a message naming neither its URL's secrets nor the token)."""
    return KitsuneError("task_authority_unavailable", f"the task authority {why}: nothing was written",
                        retryable=True)
