"""The reference model and the real system side by side (hypothesis stateful testing).

Random sequences of puts (with radix parents, pins, replica counts), put ends and revokes,
reads, exists, removes (forced or not), Path B registrations and unregistrations, node queries,
janitor runs, forced eviction passes and explicit time steps run against
:class:`mooncake_redis.testing.reference_model.Model` and a MasterService on fakeredis and on the
real Redis.
Every answer is compared; the full state (objects, radix nodes, allocated bytes per segment) is
compared at check points and at the end, and fsck must be clean.

Time: the model takes ``now`` explicitly. A real script reads Redis's TIME once, somewhere
between the Redis times read just before and after the call, so the model's answer is computed at
both ends and at every instant in between where its answer could change (a lease or a timeout
expiring); the real answer must be one of them, and the model continues from that branch.
Eviction chooses among legal victims by scores the model cannot time exactly, so for an eviction
pass the model checks that the real choice is legal (evictable objects, whole leaves,
leaf-first) and that the pass did not stop while the model still sees an evictable leaf and the
goal is not met, then applies it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from mooncake_redis import Config, MasterService, MooncakeError
from mooncake_redis.fsck import fsck, load_nodes
from mooncake_redis.keys import HASH_FIELDS
from mooncake_redis.models import ReplicateConfig, Segment
from mooncake_redis.scan import shard_ids
from mooncake_redis.testing.probes import wipe
from mooncake_redis.testing.reference_model import Answer, Model
from tests.helpers import h
from tests.servers import ensure_standalone, standalone_url

LEASE = 120
UNIT = 1000
BLOCKS = [h(f"model-block-{i}") for i in range(6)]
KEYS = [f"{b}_0_{kv}" for b in BLOCKS for kv in ("k", "v")]
# Path B keys: registered without objects (unregistering a stored object's key through the radix
# API leaves the object marked registered; see docs/reliability.md).
PB_KEYS = [f"{b}_pb" for b in BLOCKS]
CLIENTS = ["c1", "c2"]
STEPS = int(os.environ.get("MCR_MODEL_STEPS", "30"))
EXAMPLES = int(os.environ.get("MCR_MODEL_EXAMPLES", "8"))

STATUS = HASH_FIELDS["obj"]["status"]


def config(namespace: str, url: str, policy: str) -> Config:
    return Config(
        namespace=namespace,
        redis_url=url,
        num_shards=4,
        enable_radix_tree=True,
        default_kv_lease_ttl_ms=LEASE,
        default_kv_soft_pin_ttl_ms=3 * LEASE,
        put_start_discard_timeout_ms=2 * LEASE,
        put_start_release_timeout_ms=3 * LEASE,
        eviction_high_watermark_ratio=0.6,
        eviction_ratio=0.1,
        eviction_policy=policy,
        client_live_ttl_ms=600_000,
    )


def outcome(value: Any) -> Answer:
    if isinstance(value, MooncakeError):
        return ("err", int(value.code))
    return ("ok", value)


class StoreMachine(RuleBasedStateMachine):
    URL = "fakeredis://"
    POLICY = "lru"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        ns = "m" + uuid.uuid4().hex[:12]
        url = self.URL if not self.URL.startswith("fakeredis") else f"fakeredis://{ns}"
        self.cfg = config(ns, url, self.POLICY)
        self.svc: MasterService = self.run(MasterService.from_url(url, self.cfg))
        self.model = Model(self.cfg)
        self.steps = 0
        for i in range(2):
            seg = Segment(f"mseg{i}", f"n{i}", (i + 1) << 40, 6 * UNIT, f"h{i}:1")
            self.run(self.svc.mount_segment(seg, "c1"))
            self.model.mount(seg.id, seg.size)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _now(self) -> int:
        return await self.svc.backend.time_ms()

    def compare(
        self,
        what: str,
        real_call: Any,
        model_call: Any,
        placement: list[Any] | None = None,
        at: Any = None,
    ) -> Any:
        """Runs the real call, then the model at every instant the script may have read.
        ``placement``: filled with the real answer's value before the model runs (puts).
        ``at``: after a real success, the instant the script itself recorded (a put's start),
        tried first: the model must not date the put at another instant of the call, or a later
        step near the put's discard deadline sees a put of another age than the store's."""

        async def go() -> tuple[int, Any, int, int | None]:
            lo = await self._now()
            try:
                value = await real_call()
            except MooncakeError as exc:
                value = exc
            hi = await self._now()
            exact = await at() if at is not None and not isinstance(value, MooncakeError) else None
            return lo, value, hi, exact

        lo, value, hi, exact = self.run(go())
        real = outcome(value)
        if placement is not None and real[0] == "ok":
            placement.append(real[1])
        times = [lo, *(t for t in self.model.event_times() if lo < t <= hi), hi]
        if exact is not None:
            times.insert(0, exact)
        answers = []
        for t in dict.fromkeys(times):
            branch = self.model.clone()
            ans = model_call(branch, t)
            answers.append(ans)
            if ans == real:
                self.model = branch
                self.steps += 1
                return real
        raise AssertionError(f"{what}: real {real} but the model says {answers} (t {lo}..{hi})")

    # ------------------------------------------------------------------ rules
    @rule(
        key=st.sampled_from(KEYS),
        client=st.sampled_from(CLIENTS),
        parent=st.sampled_from(["", *BLOCKS]),
        replicas=st.integers(1, 2),
        soft=st.booleans(),
        hard=st.integers(0, 5).map(lambda x: x == 0),
    )
    def put_start(
        self, key: str, client: str, parent: str, replicas: int, soft: bool, hard: bool
    ) -> None:
        if parent and BLOCKS.index(parent) >= BLOCKS.index(self.model.prefix_of(key)):
            parent = ""  # parents come earlier in BLOCKS: no cycles (test_fuzz_radix has them)
        cfg = ReplicateConfig(
            replica_num=replicas, with_soft_pin=soft, with_hard_pin=hard, parent_block_hash=parent
        )

        async def real() -> Any:
            return sorted(r.segment_id for r in await self.svc.put_start(client, key, [UNIT], cfg))

        placement: list[list[str]] = []

        def model(m: Model, t: int) -> Answer:
            return m.put_start(
                client,
                key,
                UNIT,
                t,
                replica_num=replicas,
                parent=parent,
                soft_pin=soft,
                hard_pin=hard,
                placement=placement[0] if placement else None,
            )

        async def started() -> int:  # the put start the store recorded (object field pt)
            shard = self.svc.shard_of_key(key)
            return int(
                await self.svc.backend.client.hget(
                    self.svc.keys.obj(shard, key), HASH_FIELDS["obj"]["created_ms"]
                )
            )

        self.compare(
            f"put_start({key[:8]}, parent={parent[:8]})", real, model, placement, at=started
        )

    @rule(key=st.sampled_from(KEYS), client=st.sampled_from(CLIENTS))
    def put_end(self, key: str, client: str) -> None:
        self.compare(
            "put_end",
            lambda: self.svc.put_end(client, key),
            lambda m, t: m.put_end(client, key, t),
        )

    @rule(block=st.sampled_from(BLOCKS), client=st.sampled_from(CLIENTS), root=st.booleans())
    def put_block(self, block: str, client: str, root: bool) -> None:
        """The common path: both keys of a block, start then end, under the previous block
        (or as a root: many leaves for the eviction policy to order)."""
        i = BLOCKS.index(block)
        parent = BLOCKS[i - 1] if i and not root else ""
        for key in (f"{block}_0_k", f"{block}_0_v"):
            self.put_start(key, client, parent, 1, False, False)  # type: ignore[misc]
            self.put_end(key, client)  # type: ignore[misc]

    @rule(key=st.sampled_from(KEYS), client=st.sampled_from(CLIENTS))
    def put_revoke(self, key: str, client: str) -> None:
        self.compare(
            "put_revoke",
            lambda: self.svc.put_revoke(client, key),
            lambda m, t: m.put_revoke(client, key, t),
        )

    @rule(key=st.sampled_from(KEYS))
    def get_replica_list(self, key: str) -> None:
        async def real() -> Any:
            return len((await self.svc.get_replica_list(key)).replicas)

        self.compare("get_replica_list", real, lambda m, t: m.get_replica_list(key, t))

    @rule(key=st.sampled_from(KEYS))
    def exist(self, key: str) -> None:
        self.compare("exist", lambda: self.svc.exist_key(key), lambda m, t: m.exist(key, t))

    @rule(key=st.sampled_from(KEYS), force=st.booleans())
    def remove(self, key: str, force: bool) -> None:
        self.compare(
            f"remove(force={force})",
            lambda: self.svc.remove(key, force),
            lambda m, t: m.remove(key, t, force),
        )

    @rule(block=st.sampled_from(BLOCKS), parent=st.sampled_from(["", *BLOCKS]))
    def register(self, block: str, parent: str) -> None:
        if parent and BLOCKS.index(parent) >= BLOCKS.index(block):
            parent = ""
        keys = [f"{block}_pb"]
        self.compare(
            "register",
            lambda: self.svc.register_radix_tree_node(block, parent, keys),
            lambda m, t: m.register(block, parent, keys, t),
        )

    @rule(keys=st.lists(st.sampled_from(PB_KEYS), min_size=1, max_size=3))
    def unregister(self, keys: list[str]) -> None:
        self.compare(
            "unregister",
            lambda: self.svc.unregister_radix_tree_keys(keys),
            lambda m, t: m.unregister(keys),
        )

    @rule(block=st.sampled_from(BLOCKS))
    def get_node(self, block: str) -> None:
        async def real() -> Any:
            n = await self.svc.get_keys_by_prefix(block)
            return (n.parent_prefix_hash, sorted(n.keys), sorted(n.children))

        self.compare("get_keys_by_prefix", real, lambda m, t: m.get_node(block))

    @rule()
    def janitor(self) -> None:
        async def real() -> Any:
            rep = await self.svc.run_janitor_once(force=True)
            return (rep.discarded_puts, rep.released_buffers)

        self.compare("janitor", real, lambda m, t: m.janitor(t))

    @rule(ms=st.sampled_from([LEASE + 20, 2 * LEASE + 20]))
    def wait(self, ms: int) -> None:
        """Time is a step: leases, pins and put timeouts expire."""
        self.run(asyncio.sleep(ms / 1000))

    @precondition(lambda self: hasattr(self.svc, "evict_once"))
    @rule()
    def evict(self) -> None:
        async def go() -> tuple[int, Any, int]:
            lo = await self._now()
            res = await self.svc.evict_once(force=True)  # type: ignore[attr-defined]
            return lo, res, await self._now()

        before = set(self.model.objects)
        nodes_before = {h for h, n in self.model.nodes.items() if n.keys}
        t0 = self.run(self._now())
        # Leaves surely evictable for the whole pass, with their policy scores from Redis.
        cands = [h for h in self.model.eviction_order(t0) if not self.model.soft_pinned(h, t0)]
        fields = self.run(self.svc.get_nodes(cands))
        scores = {h: self.model.score(n.score, n.hits) for h, n in zip(cands, fields) if n}
        lo, res, hi = self.run(go())
        present = set(self.run(self._real_objects()))
        real_nodes = self.run(load_nodes(self.svc))  # type: ignore[arg-type]
        evicted = before - present
        dropped = {h for h in nodes_before if h not in real_nodes or not real_nodes[h].keys}
        assert present <= before, f"evict created objects {present - before}"
        assert set(res.evicted_keys) == evicted, (res.evicted_keys, evicted)
        freed = sum(self.model.objects[k].size * len(self.model.objects[k].segs) for k in evicted)
        problems = self.model.apply_eviction(evicted, dropped, hi)
        assert not problems, problems
        # Policy order: no leaf the pass left behind scored below a leaf it took.
        taken = [scores[h] for h in scores if h in dropped]
        kept = [scores[h] for h in scores if h not in dropped]
        if taken and kept:
            assert max(taken) <= min(kept), (self.cfg.eviction_policy, taken, kept)
        # The pass may stop early only at its goal: used <= (hw - er) of the capacity with at
        # least er of it freed. Otherwise nothing may be left that was surely evictable (at lo).
        alloc, cap = self.model.usage()
        goal = self.cfg.eviction_high_watermark_ratio - self.cfg.eviction_ratio
        if alloc > goal * cap or freed < self.cfg.eviction_ratio * cap:
            order = self.model.eviction_order(lo)
            assert not order, f"evictor stopped with leaves {order[:3]} evictable, used {alloc}"
        self.steps += 1

    @rule()
    def check_state(self) -> None:
        self.run(self._check_state())

    # ------------------------------------------------------------------ state
    async def _real_objects(self) -> dict[str, tuple[bool, int, bool, bool]]:
        client = self.svc.backend.client
        keys = self.svc.keys
        out = {}
        for shard, found in (await shard_ids(self.svc.backend, keys, "obj")).items():
            for k in found:
                st_, r, hp, sp = await client.hmget(
                    keys.obj(shard, k), HASH_FIELDS["obj"]["status"], "r", "hp", "sp"
                )
                reps = r.decode().split(";") if r else []
                out[k] = (st_ == b"C", len(reps), hp == b"1", sp is not None)
        return out

    async def _check_state(self) -> None:
        if self.model.discarded:
            return  # discarded buffers: released by time, compared after the janitor
        nodes = await load_nodes(self.svc)  # type: ignore[arg-type]
        real = {
            "objects": dict(sorted((await self._real_objects()).items())),
            "nodes": {
                h: (n.parent_prefix_hash, sorted(n.keys), sorted(n.children))
                for h, n in sorted(nodes.items())
            },
            "allocated": {s.id: s.allocated for s in await self.svc.segment_stats()},
        }
        want = self.model.state()
        for part in ("objects", "nodes", "allocated"):
            assert real[part] == want[part], f"{part}: real {real[part]} model {want[part]}"
        report = await fsck(self.svc)  # type: ignore[arg-type]
        assert report.clean, report.to_dict()["problems"]

    def teardown(self) -> None:
        try:
            self.run(self._check_state())
        finally:
            if not self.URL.startswith("fakeredis"):
                self.run(wipe(self.svc))
            self.run(self.svc.aclose())
            self.loop.close()


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


class FakeLru(StoreMachine):
    URL = "fakeredis://"


class FakeLruFreq(StoreMachine):
    URL = "fakeredis://"
    POLICY = "lru-freq"


class RealLru(StoreMachine):
    URL = "redis://127.0.0.1:6379"


TestModelFakeredisLru = FakeLru.TestCase
TestModelFakeredisLru.settings = SETTINGS
TestModelFakeredisLruFreq = FakeLruFreq.TestCase
TestModelFakeredisLruFreq.settings = SETTINGS
TestModelRealRedis = RealLru.TestCase
TestModelRealRedis.settings = SETTINGS


@pytest.fixture(autouse=True, scope="module")
def _real_redis_up() -> None:
    RealLru.URL = ensure_standalone(standalone_url())
