"""The task store: one suite run against LocalTaskStore and JetStreamTaskStore (a real nats-server,
one connection per node), then what only the bucket shows (its writes, a restart)."""

from __future__ import annotations

import asyncio
import itertools
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from nats.aio.client import Client

from actors.buckets import TASKS_BUCKET
from actors.task_store import JetStreamTaskStore, LocalTaskStore, TaskStore
from core.tasks import (
    Task,
    call_started,
    completed,
    expired_now,
    new_task,
    renewed,
    revoked,
    taken_over,
    takeover,
)
from messages.errors import KitsuneError
from tests.nats_access import NatsAccess

pytestmark = pytest.mark.anyio

Stores = Callable[..., Awaitable[list[TaskStore]]]
"""``stores(n, **options)``: ``n`` started stores of one fleet (the nodes; one shared store in memory)."""


@pytest.fixture(params=["local", "jetstream"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    made: list[TaskStore] = []
    clients: list[Client] = []
    fleet = "tasks-" + secrets.token_hex(4)

    async def make(n: int = 1, **options: Any) -> list[TaskStore]:
        if request.param == "local":
            local = LocalTaskStore(**options)
            await local.start()
            made.append(local)
            return [local] * n
        access: NatsAccess = request.getfixturevalue("nats_access")
        nodes: list[TaskStore] = []
        for _ in range(n):
            clients.append(await access.client())
            nodes.append(JetStreamTaskStore(clients[-1], fleet, **options))
            await nodes[-1].start()
        made.extend(nodes)
        return nodes
    yield make
    for store in made:
        await store.stop()
    for client in clients:
        await client.close()


def a_task(tabs: list[int], *, session: str = "s-1", agent: str = "alice", ttl: float = 30.0,
           now: float | None = None) -> Task:
    return new_task(agent, session, "buy shoes", tabs, now=time.time() if now is None else now,
                    scope="browser", lease_ttl=ttl)


async def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


def takeover_by(session: str) -> Callable[[Task], Task]:
    return lambda t: taken_over(t, session, time.time())


def newest(store: TaskStore, tab: int) -> Task | None:
    """The newest task the store's mirror has on ``tab`` that is not completed."""
    return next(iter(store.tasks_of_tab(tab)), None)


def code_of(outcome: object) -> str | None:
    return outcome.code if isinstance(outcome, KitsuneError) else None


async def test_a_created_task_is_read_back_from_the_store_and_seen_by_every_node(stores: Stores) -> None:
    first, second = await stores(2)
    task = a_task([3, 4])
    await first.create(task)
    assert await first.get(task.id) == task and await second.get(task.id) == task  # decisive reads
    await eventually(lambda: newest(second, 4) == task)
    assert newest(first, 3) == task and newest(first, 5) is None
    assert second.of_agent("alice") == [task] and second.of_agent("bob") == []
    assert await first.get("t-0000000000000000") is None and await first.get("../x.>") is None
    with pytest.raises(KitsuneError) as error:
        await first.change("t-0000000000000000", lambda t: revoked(t, time.time()))
    assert (error.value.code, error.value.http_status) == ("task_not_found", 404)


async def test_a_tab_is_in_one_active_or_expired_task_at_most(stores: Stores) -> None:
    first, second = await stores(2)
    held = a_task([7, 8])
    await first.create(held)
    await eventually(lambda: newest(second, 7) is not None)
    with pytest.raises(KitsuneError) as error:
        await second.create(a_task([9, 8], session="s-2"))
    assert (error.value.code, error.value.http_status, error.value.state) == (
        "task_conflict", 409, {"tabId": 8, "taskId": held.id})
    await first.change(held.id, lambda t: expired_now(t, time.time()))
    with pytest.raises(KitsuneError):
        await first.create(a_task([8]))
    done = await first.change(held.id, lambda t: completed(taken_over(t, "s-1", time.time()), "s-1", time.time()))
    later = a_task([8], session="s-2", now=time.time() + 1)
    await first.create(later)  # a completed task holds no tab
    assert newest(first, 8) == later and newest(first, 7) is None and done.status == "completed"
    assert [t.id for t in first.of_agent("alice")] == [later.id, held.id]  # newest first


async def test_tasks_created_on_one_tab_through_many_nodes_at_once_leave_exactly_one(stores: Stores) -> None:
    nodes = await stores(4)
    for round_ in range(5):  # all at once: no node's mirror has seen another's task yet
        tab = 100 + round_
        tasks = [a_task([tab, 200 + 10 * round_ + i], session=f"s-{i}") for i in range(len(nodes))]
        outcomes = await asyncio.gather(*(node.create(task) for node, task in zip(nodes, tasks, strict=True)),
                                        return_exceptions=True)
        won = [task for task, outcome in zip(tasks, outcomes, strict=True) if outcome is None]
        assert len(won) == 1 and sorted(map(code_of, outcomes), key=str) == [None] + ["task_conflict"] * 3, outcomes
        for task in tasks:  # a loser is not left behind
            assert (await nodes[0].get(task.id) is not None) == (task in won)
        free = [task.tabs[1] for task in tasks if task not in won]
        await nodes[0].create(a_task(free, session="s-9"))  # and the other tabs it claimed are free again


async def test_a_tab_claimed_by_a_task_that_is_gone_or_over_is_free_again(stores: Stores) -> None:
    first, second = await stores(2)
    held = a_task([31, 32])
    await first.create(held)
    await first.change(held.id, lambda t: revoked(t, time.time()))
    await second.create(a_task([32], session="s-2"))  # a revoked task's claim is stale
    with pytest.raises(KitsuneError) as error:
        await first.create(a_task([32, 33], session="s-3"))
    assert error.value.code == "task_conflict"
    await first.create(a_task([33], session="s-3"))  # the refused task claimed nothing for good


async def test_a_renewal_with_more_than_half_its_lease_left_writes_nothing(stores: Stores) -> None:
    (store,) = await stores()
    task = a_task([11], ttl=30.0, now=time.time() - 10)
    await store.create(task)
    assert await store.change(task.id, lambda t: renewed(t, "s-1", time.time())) == task
    assert await store.get(task.id) == task
    renewal = await store.change(task.id, lambda t: renewed(t, "s-1", time.time() + 6))
    assert renewal.lease_expires > task.lease_expires and await store.get(task.id) == renewal


async def test_a_transitions_refusal_reaches_the_caller_and_nothing_is_written(stores: Stores) -> None:
    (store,) = await stores()
    task = a_task([12])
    await store.create(task)
    for change, code in [(lambda t: renewed(t, "s-2", time.time()), "task_leased"),
                         (lambda t: taken_over(t, "s-2", time.time()), "task_leased"),
                         (lambda t: completed(t, None, time.time()), "task_leased")]:
        with pytest.raises(KitsuneError) as error:
            await store.change(task.id, change, attempts=1)
        assert error.value.code == code
    assert await store.get(task.id) == task


async def test_of_concurrent_takeovers_through_many_nodes_exactly_one_wins(stores: Stores) -> None:
    nodes = await stores(6)
    task = a_task([13], ttl=30.0)
    await nodes[0].create(task)
    conflicts = 0
    for round_ in itertools.count():  # 3 rounds, more until readers raced (a loaded machine may run them in turn)
        if round_ >= 12 or (round_ >= 3 and conflicts):
            break
        await nodes[0].change(task.id, lambda t: expired_now(t, time.time()))
        sessions = [f"r{round_}-s{i}" for i in range(len(nodes))]
        outcomes = await asyncio.gather(*(node.change(task.id, takeover_by(session), attempts=1)
                                          for node, session in zip(nodes, sessions, strict=True)),
                                        return_exceptions=True)
        won = [o for o in outcomes if isinstance(o, Task)]
        lost = [code_of(o) for o in outcomes if not isinstance(o, Task)]
        assert len(won) == 1 and won[0].owner in sessions and won[0].status == "active"
        # a loser that read before the winner wrote lost the compare-and-set; one that read after
        # met the winner's live lease (none retried: one attempt)
        assert set(lost) <= {"task_takeover_conflict", "task_leased"}, lost
        conflicts += lost.count("task_takeover_conflict")
        assert await nodes[-1].get(task.id) == won[0]
    assert conflicts, "no round had two takeovers read the task before either wrote it"


def started(call: int) -> Callable[[Task], Task | None]:
    return lambda t: call_started(t, call)


async def test_a_takeover_racing_only_the_records_of_the_holder_s_calls_reads_again_and_wins(stores: Stores) -> None:
    nodes = await stores(3)
    task = a_task([15], ttl=30.0)
    await nodes[0].create(task)
    retried = False
    for round_ in itertools.count():  # until the takeover lost a compare-and-set to a call's records and read again
        if round_ >= 12 or retried:
            break
        await nodes[0].change(task.id, lambda t: expired_now(t, time.time()))
        reads: list[Task] = []
        take = takeover(f"r{round_}", time.time())

        def counted(t: Task, take: Callable[[Task], Task] = take, reads: list[Task] = reads) -> Task:
            reads.append(t)
            return take(t)
        outcomes = await asyncio.gather(*(nodes[2].change(task.id, started(100 * round_ + n)) for n in range(3)),
                                        nodes[1].change(task.id, counted), return_exceptions=True)
        assert isinstance(outcomes[-1], Task) and outcomes[-1].owner == f"r{round_}", outcomes[-1]
        retried = len(reads) > 1
    assert retried, "no round had a call's records written between the takeover's read and its write"


async def test_renewals_and_takeovers_interleaved_keep_one_chain_of_changes_and_one_owner(stores: Stores) -> None:
    """Each successful change appends its op to ``in_flight``: a lost update would drop one, and the
    chain says who owned the task before each op, so each op's right to succeed is checked."""
    nodes = await stores(4)
    task = a_task([14], ttl=30.0, session="s-0")
    await nodes[0].create(task)
    ops: dict[int, tuple[str, str]] = {}  # op -> (kind, session)
    succeeded: set[int] = set()
    chance = random.Random(17)

    def op(kind: str, session: str, number: int) -> Callable[[Task], Task | None]:
        def transition(t: Task) -> Task | None:
            now = time.time()
            changed = {"renew": lambda: renewed(t, session, now + 20) or t,
                       "takeover": lambda: taken_over(t, session, now),
                       "force": lambda: taken_over(t, session, now, force=True),
                       "expire": lambda: expired_now(t, now) or t}[kind]()
            return call_started(changed, number)
        return transition
    for _ in range(12):
        batch, now_owner = [], (await nodes[0].get(task.id) or task).owner
        for node in nodes:
            number = len(ops)
            kind = chance.choice(["renew", "renew", "takeover", "takeover", "force", "expire"])
            ops[number] = (kind, now_owner if kind == "renew" and chance.random() < 0.8 else f"s-{chance.randrange(3)}")
            batch.append((number, node.change(task.id, op(*ops[number], number),
                                              attempts=1 if kind in ("takeover", "force") else 5)))
        for (number, _), outcome in zip(batch, await asyncio.gather(*(c for _, c in batch), return_exceptions=True),
                                        strict=True):
            assert isinstance(outcome, Task) or code_of(outcome) in (
                "task_takeover_conflict", "task_leased", "task_expired", "task_closed"), outcome
            if isinstance(outcome, Task):
                succeeded.add(number)
    final = await nodes[0].get(task.id)
    assert final is not None
    chain = [f.call for f in final.in_flight]
    assert sorted(chain) == sorted(succeeded) and len(chain) == len(set(chain))  # no change lost, none twice
    owner, live = "s-0", True
    for number in chain:
        kind, session = ops[number]
        assert kind != "renew" or (live and owner == session), (number, kind, session, owner)
        assert kind != "takeover" or not live or owner == session, (number, kind, session, owner)
        owner, live = (owner, False) if kind == "expire" else (session, True)
    assert final.owner == owner and (final.status == "active") == live


async def test_the_sweeper_of_each_node_expires_a_lapsed_lease_and_deletes_old_tombstones(stores: Stores) -> None:
    first, second = await stores(2, sweep_every=0.1, tombstone_ttl=0.6)
    lapsing, closing = a_task([15], ttl=0.4), a_task([16])
    await first.create(lapsing)
    await first.create(closing)
    await first.change(closing.id, lambda t: revoked(t, time.time()))
    await eventually(lambda: getattr(newest(second, 15), "status", None) == "expired")
    swept = await first.get(lapsing.id)
    assert swept is not None and swept.status == "expired" and swept.lease_expires == lapsing.lease_expires
    await eventually(lambda: newest(first, 16) is None and newest(second, 16) is None)
    assert await first.get(closing.id) is None
    assert (await first.get(lapsing.id)) == swept  # an expired task stays: a takeover may claim it
    deadline = time.monotonic() + 10  # the deleted task's tab claim goes with it, right after it
    while await first._read_claim(16) is not None:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the claim of a deleted task stayed"
        await asyncio.sleep(0.05)
    assert (await second._read_claim(15))[0] == lapsing.id  # type: ignore[attr-defined]  # the expired one's stays


async def test_a_node_started_later_mirrors_the_tasks_already_there(nats_access: NatsAccess) -> None:
    fleet = "tasks-" + secrets.token_hex(4)
    clients = [await nats_access.client() for _ in range(2)]
    first = JetStreamTaskStore(clients[0], fleet)
    await first.start()
    try:
        task = a_task([21])
        await first.create(task)
        js = clients[0].jetstream()
        assert (await (await js.key_value(TASKS_BUCKET)).status()).history == 1
        before = (await js.stream_info(f"KV_{TASKS_BUCKET}")).state.last_seq
        await first.change(task.id, lambda t: renewed(t, "s-1", time.time()))  # more than half left: no write
        assert (await js.stream_info(f"KV_{TASKS_BUCKET}")).state.last_seq == before
        task = await first.change(task.id, lambda t: renewed(t, "s-1", time.time() + 16))
        assert (await js.stream_info(f"KV_{TASKS_BUCKET}")).state.last_seq == before + 1
        later = JetStreamTaskStore(clients[1], fleet)
        await later.start()
        assert newest(later, 21) == task and later.of_agent("alice") == [task]
        await later.stop()
    finally:
        await first.stop()
        for client in clients:
            await client.close()
