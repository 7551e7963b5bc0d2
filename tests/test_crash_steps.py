"""Crash between steps: every operation that spans hash tags, stopped after each of its steps.

For each operation below, a recording run lists the step boundaries it passes (the
``checkpoint`` calls: register:linked, unlink:child_removed, unlink:cascade_step,
put_start:reserved, erase:erased, drain:freed, mount:registered, unmount:begun,
unmount:dropped, and eviction's once it lands). Then, for every boundary, a fresh world is built
and the operation is killed there: the hook raises a BaseException (nothing in the code path can
catch it) and from then on the dead worker's Redis connection refuses every command, so no
background task of the dead worker writes anything either. A fresh worker then shows:

1. invariants hold: fsck reports nothing but the states the protocol allows between steps;
2. the janitor plus ``fsck --repair`` past the grace period return the store to clean;
3. no COMPLETE object was lost (each one the operation did not target is still there with the
   same put id) and none leaked (fsck's allocation checks: every buffer owned, bytes add up).

``test_sigkill_between_steps`` does the same with a real process killed by SIGKILL at the
boundary (real Redis and the cluster).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pytest

from mooncake_redis import Config, MasterService, MooncakeError
from mooncake_redis.fsck import ALLOWED_KINDS, fsck
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.testing.probes import complete_objects, wipe
from tests.conftest import _cleanup
from tests.helpers import hashes_in_shard

CLIENT = "crash-client"
SIZE = 1000
CFG: dict[str, Any] = dict(
    num_shards=8,
    enable_radix_tree=True,
    default_kv_lease_ttl_ms=0,
    # Wide enough that a loaded 2-core machine running fakeredis still commits in time.
    alloc_commit_deadline_ms=1500,
    alloc_reclaim_grace_ms=1600,
    put_start_discard_timeout_ms=100,
    put_start_release_timeout_ms=150,
    evictor_lease_ttl_ms=300,
)
RECOVERY_SLEEP = 1.65  # past alloc_reclaim_grace_ms and the stale-put timeouts


class Crash(BaseException):
    """The worker dies here: no ``except Exception`` in the code path can catch it."""


def segment(i: int) -> Segment:
    return Segment(f"cseg{i}", f"node{i}", base=(i + 1) << 40, size=1 << 20, te_endpoint=f"h{i}:1")


@dataclass
class World:
    """Names of one scenario, derived from the service (so a subprocess finds the same)."""

    svc: MasterService
    n: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        shard_of = {
            "R": 0, "A": 1, "B": 2, "S": 3, "O1": 4, "O2": 5, "Q1": 4, "Q2": 5, "Q3": 6,
            "Q4": 7, "Z": 6, "N": 7, "X": 6, "P": 3, "T": 1,
        }  # fmt: skip
        shards = self.svc.config.num_shards  # 1 on one Redis by default: all in shard 0
        for name, shard in shard_of.items():
            self.n[name] = next(hashes_in_shard(self.svc, shard % shards, "crash-" + name))

    def __getattr__(self, name: str) -> str:
        n = self.__dict__.get("n", {})
        if name in n:
            return str(n[name])
        raise AttributeError(name)


async def put(svc: MasterService, key: str, parent: str = "", seg: int = 0) -> None:
    cfg = ReplicateConfig(parent_block_hash=parent, preferred_segment=f"cseg{seg}")
    await svc.put_start(CLIENT, key, [SIZE], cfg)
    await svc.put_end(CLIENT, key)


async def build(svc: MasterService) -> World:
    """Objects R -> A -> B and R -> S (shards 0..3), O2 under a shell O1, plain objects, a
    PROCESSING put P under A, a Path-B chain Q1 -> Q2 -> Q3 -> Q4 of which Q1..Q3 are shells,
    and a Path-B node Z under R; two segments, objects spread over both."""
    await wipe(svc)
    w = World(svc)
    for i in range(2):
        await svc.mount_segment(segment(i), CLIENT)
    await put(svc, w.R, "", 0)
    await put(svc, w.A, w.R, 1)
    await put(svc, w.B, w.A, 0)
    await put(svc, w.S, w.R, 1)
    # O2 under a shell O1: the edge comes from Path B (a put under an unstored parent is
    # refused by the radix put guard), the object from a put that names no parent.
    await svc.register_radix_tree_node(w.O2, w.O1, [w.O2])
    await put(svc, w.O2, "", 1)
    for i in range(4):
        await put(svc, f"plain-{i}", "", i % 2)
    await svc.put_start(CLIENT, w.P, [SIZE], ReplicateConfig(parent_block_hash=w.A))
    chain = [w.Q1, w.Q2, w.Q3, w.Q4]
    await svc.batch_register_radix_tree_node(
        [(q, chain[i - 1] if i else "", [q]) for i, q in enumerate(chain)]
    )
    await svc.unregister_radix_tree_keys(chain[:3])
    await svc.register_radix_tree_node(w.Z, w.R, [w.Z])
    report = await fsck(svc)
    assert report.clean, report.to_dict()["problems"]
    return w


# An operation: (world) -> awaitable, and the COMPLETE objects it may legitimately take away.
Op = Callable[[World], Awaitable[Any]]


async def op_register(w: World) -> Any:
    return await w.svc.register_radix_tree_node(w.N, w.B, [w.N])


async def op_unregister_cascade(w: World) -> Any:
    return await w.svc.unregister_radix_tree_keys([w.Q4])


async def op_put_with_parent(w: World) -> Any:
    cfg = ReplicateConfig(parent_block_hash=w.B, replica_num=2)
    return await w.svc.put_start(CLIENT, w.X, [SIZE], cfg)


async def op_put_refused(w: World) -> Any:
    """Commit refused (Z already has parent R): the reservation and the edge are undone."""
    try:
        await w.svc.put_start(CLIENT, w.Z, [SIZE], ReplicateConfig(parent_block_hash=w.S))
    except MooncakeError:
        return None
    raise AssertionError("put_start with a conflicting parent was accepted")


async def op_remove_leaves(w: World) -> Any:
    return await w.svc.batch_remove([w.B, w.O2, "plain-0"])


async def op_revoke(w: World) -> Any:
    return await w.svc.put_revoke(CLIENT, w.P)


async def op_remove_regex(w: World) -> Any:
    return await w.svc.remove_by_regex("^plain-")


async def op_unmount(w: World) -> Any:
    return await w.svc.unmount_segment("cseg1", CLIENT)


async def op_mount(w: World) -> Any:
    return await w.svc.mount_segment(segment(2), CLIENT)


async def op_janitor_stale_put(w: World) -> Any:
    await asyncio.sleep(0.2)  # P is past the discard and release timeouts
    return await w.svc.run_janitor_once(force=True)


async def op_expire_clients(w: World) -> Any:
    svc = await MasterService.from_url(
        w.svc.backend.url,
        Config(
            **{**CFG, "client_live_ttl_ms": 120, "num_shards": w.svc.config.num_shards},
            namespace=w.svc.config.namespace,
        ),
    )
    svc.fault_hook = w.svc.fault_hook
    svc.backend.call = w.svc.backend.call  # type: ignore[method-assign]  # dies with the worker
    try:
        # The service hears (ticks) for longer than the ttl while the clients stay silent:
        # only heard silence expires a client.
        for _ in range(8):
            await svc.heartbeat()
            await asyncio.sleep(0.02)
        return await svc.run_janitor_once(force=True)
    finally:
        await svc.aclose()


async def op_evict(w: World) -> Any:
    """A forced radix eviction pass under ``lru`` (leaf-first; frees through the shard
    outbox; the leaves rescored in ms first)."""
    w.svc.ctx.config = replace(w.svc.ctx.config, eviction_policy="lru")
    await w.svc.eviction.record_policy()
    return await w.svc.evict_once(force=True, max_objects=4)  # type: ignore[attr-defined]


async def op_evict_tiered(w: World) -> Any:
    """The same pass under the default leaf policy, tiered (logical put grace): its last step
    publishes the clocks."""
    assert w.svc.ctx.config.eviction_policy == "tiered"
    return await w.svc.evict_once(force=True, max_objects=4)  # type: ignore[attr-defined]


ALL_OBJECTS = {"*"}
# What a client does after its call failed, before the store must be clean again (None: nothing).
RETRY: dict[str, Op] = {"mount": op_mount}
OPS: dict[str, tuple[Op, Callable[[World], set[str]]]] = {
    "register": (op_register, lambda w: set()),
    "unregister_cascade": (op_unregister_cascade, lambda w: set()),
    "put_with_parent": (op_put_with_parent, lambda w: set()),
    "put_refused": (op_put_refused, lambda w: set()),
    "remove_leaves": (op_remove_leaves, lambda w: {w.B, w.O2, "plain-0"}),
    "revoke": (op_revoke, lambda w: set()),
    "remove_regex": (op_remove_regex, lambda w: {f"plain-{i}" for i in range(4)}),
    "unmount": (op_unmount, lambda w: {w.A, w.S, w.O2, "plain-1", "plain-3"}),
    "mount": (op_mount, lambda w: set()),
    "janitor_stale_put": (op_janitor_stale_put, lambda w: set()),
    "expire_clients": (op_expire_clients, lambda w: ALL_OBJECTS),
    "evict": (op_evict, lambda w: ALL_OBJECTS),  # fsck, the parent rule and repair still hold
    "evict_tiered": (op_evict_tiered, lambda w: ALL_OBJECTS),
}


class Crasher:
    """Fault hook: records the steps, and kills the worker at the ``crash_at``-th one."""

    def __init__(self, svc: MasterService, crash_at: int | None) -> None:
        self.svc = svc
        self.crash_at = crash_at
        self.steps: list[str] = []
        self.dead = False
        real_call = svc.backend.call

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.dead:
                raise Crash("dead worker")
            return await real_call(*args, **kwargs)

        svc.backend.call = call  # type: ignore[method-assign]
        svc.fault_hook = self

    async def __call__(self, step: str) -> None:
        if self.dead:
            raise Crash("dead worker")
        self.steps.append(step)
        if self.crash_at is not None and len(self.steps) - 1 == self.crash_at:
            self.dead = True
            raise Crash(step)


# States a crash between steps may leave besides fsck's ALLOWED_KINDS (dangling/stray edges):
# a mount stopped after its registry step (the client's retry or its expiry finishes it).
STEP_STATES = {"segment_without_allocator"}


async def recover_and_check(
    make_service: Any,
    before: dict[str, str],
    targets: set[str],
    where: str,
    retry: Op | None = None,
) -> None:
    svc: MasterService = await make_service(**CFG)  # a fresh worker
    report = await fsck(svc)
    # An unmount stopped half way (mounted=0, replicas not dropped yet) is resumable by the
    # janitor; fsck names its replicas "replica_unmounted" (see docs/reliability.md).
    unmounting = {s.id for s in await svc.segment_stats() if not s.mounted}
    bad = [
        f"{p.kind}: {p.detail}"
        for p in report.problems
        if p.kind not in ALLOWED_KINDS | STEP_STATES
        and not (p.kind == "replica_unmounted" and p.detail.split()[3] in unmounting)
    ]
    assert not bad, f"{where}: invariant violations right after the crash: {bad}"
    if retry is not None:
        await retry(World(svc))
    if hasattr(svc, "resume_unlinks"):  # what the next evictor does first
        await svc.resume_unlinks()
    if any(st.pending for st in await svc.segment_stats()):
        await asyncio.sleep(RECOVERY_SLEEP)  # reservations are reclaimed past their grace only
    await svc.run_janitor_once(force=True)
    await fsck(svc, repair=True, grace_ms=-1)
    report = await fsck(svc)
    assert report.clean, (
        f"{where}: not clean after janitor + repair: {report.to_dict()['problems']}"
    )
    after = await complete_objects(svc)
    if targets != ALL_OBJECTS:
        lost = sorted(k for k, pid in before.items() if k not in targets and after.get(k) != pid)
        assert not lost, f"{where}: COMPLETE objects lost: {lost}"
    # The store still works: a new put under a surviving node, and a clean fsck again.
    await svc.mount_segment(segment(3), CLIENT)
    await put(svc, "after-crash", "", 3)
    assert (await fsck(svc)).clean


async def steps_of(make_service: Any, name: str) -> list[str]:
    svc: MasterService = await make_service(**CFG)
    w = await build(svc)
    rec = Crasher(svc, None)
    await OPS[name][0](w)
    return rec.steps


@pytest.mark.parametrize("shards", [8, 0], ids=["8-shards", "default-shards"])
@pytest.mark.parametrize("name", list(OPS))
async def test_crash_after_every_step(make_service: Any, name: str, shards: int) -> None:
    """Also on the default shard count (1 on one Redis, 64 on a cluster): the other tests
    pin 8 shards."""
    make_service = partial(_with_shards, make_service, shards)
    op, targets_of = OPS[name]
    steps = await steps_of(make_service, name)
    assert steps, f"{name} passes no step boundary"
    for i, step in enumerate(steps):
        svc: MasterService = await make_service(**CFG)
        w = await build(svc)
        before = await complete_objects(svc)
        crasher = Crasher(svc, i)
        try:
            await op(w)
        except Crash:
            pass
        else:  # timing made this run pass fewer boundaries (e.g. no stale put yet): still check
            assert not crasher.dead
        await recover_and_check(
            make_service, before, targets_of(w), f"{name} @ {i}:{step}", RETRY.get(name)
        )


async def _with_shards(make_service: Any, shards: int, **cfg: Any) -> MasterService:
    svc: MasterService = await make_service(**{**cfg, "num_shards": shards})
    return svc


# ---------------------------------------------------------------------- SIGKILL variant
@pytest.fixture
async def make_real(real_backend_url: str) -> AsyncIterator[Any]:
    """As conftest's make_service, on the real servers only (processes share them)."""
    namespace = "k" + uuid.uuid4().hex[:12]
    made: list[MasterService] = []

    async def make(**overrides: Any) -> MasterService:
        svc = await MasterService.from_url(
            real_backend_url, Config(namespace=namespace, **overrides)
        )
        made.append(svc)
        return svc

    yield make
    for svc in made:
        await svc.aclose()
    _cleanup(real_backend_url, namespace)


SIGKILL_OPS = ["unregister_cascade", "put_with_parent"]


def _child_main(url: str, namespace: str, name: str, crash_at: int) -> None:  # pragma: no cover
    async def main() -> None:
        svc = await MasterService.from_url(url, Config(**CFG, namespace=namespace))
        w = World(svc)
        count = 0

        async def hook(step: str) -> None:
            nonlocal count
            if count == crash_at:
                os.kill(os.getpid(), signal.SIGKILL)
            count += 1

        svc.fault_hook = hook
        await OPS[name][0](w)

    asyncio.run(main())


@pytest.mark.parametrize("name", SIGKILL_OPS)
async def test_sigkill_between_steps(real_backend_url: str, make_real: Any, name: str) -> None:
    """The same, with the operation run by a separate process killed by SIGKILL at each step."""
    make_service = make_real
    steps = await steps_of(make_service, name)
    for i, step in enumerate(steps):
        svc: MasterService = await make_service(**CFG)
        w = await build(svc)
        before = await complete_objects(svc)
        code = (
            "from tests.test_crash_steps import _child_main; "
            f"_child_main({real_backend_url!r}, {svc.config.namespace!r}, {name!r}, {i})"
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
        await recover_and_check(
            make_service, before, OPS[name][1](w), f"SIGKILL {name} @ {i}:{step}"
        )
