"""The chaos run's load: lanes of put chains, removes, lookups and registrations through the
workers, and a pinger that keeps both clients alive; each lane books what it saw in a ledger
(acknowledged objects, removes, errors, latencies) that the run checks against the store."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from dataclasses import dataclass, field

from blake3 import blake3

from ..pausing import pause
from .chaos_phases import PhaseState

OBJ = 1024


@dataclass
class Ledger:
    complete: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    maybe_removed: set[str] = field(default_factory=set)
    ops: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: list[str] = field(default_factory=list)  # the first messages, to diagnose
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (t, seconds)
    interrupted: int = 0
    refused_in_phases: int = 0
    phase: PhaseState = field(default_factory=PhaseState)

    def op(self, name: str, t0: float) -> None:
        now = time.monotonic()
        self.ops[name] = self.ops.get(name, 0) + 1
        self.latencies.append((now, now - t0))

    def error(self, name: str, message: str = "") -> None:
        self.errors[name] = self.errors.get(name, 0) + 1
        if message and len(self.error_samples) < 5:
            self.error_samples.append(f"{name}: {message}"[:300])


# Answers the load expects under memory pressure and eviction; anything else is an error.
_EXPECTED = {
    "batch_put_start": {-200, -704},  # NO_AVAILABLE_HANDLE, OBJECT_NOT_FOUND (parent evicted)
    "get_replica_list": {-704},  # evicted meanwhile
    "remove": {-704},
}


async def lane(
    i: int, urls: list[str], ledger: Ledger, stop_at: float, seed: int, killing: bool
) -> None:
    from ..client import AsyncMasterClient
    from ..errors import ErrorCode, MooncakeError

    rng = random.Random(seed * 1000 + i)
    cid = f"chaos-client-{i % 2}"
    chain: list[str] = []
    async with AsyncMasterClient(urls, backoff_s=0.02, retries=6, timeout=10.0) as c:
        while time.monotonic() < stop_at:
            try:
                if chain and (len(chain) > 12 or rng.random() < 0.05):
                    if rng.random() < 0.5:  # remove the end of a finished chain (a leaf)
                        key = chain[-1] + "_0_k"
                        t0 = time.monotonic()
                        try:
                            await c.remove(key, force=True)
                            ledger.removed.add(key)
                        except MooncakeError as exc:
                            if exc.code == ErrorCode.RPC_FAIL:
                                ledger.maybe_removed.add(key)  # cut by a kill: maybe applied
                            if int(exc.code) not in _EXPECTED["remove"]:
                                raise
                        ledger.op("remove", t0)
                    chain = []
                n = rng.randint(1, 4)
                blocks = [
                    blake3(f"chaos:{seed}:{i}:{uuid.uuid4().hex}".encode()).hexdigest()
                    for _ in range(n)
                ]
                parents = [chain[-1] if chain else "", *blocks[:-1]]
                keys = [b + "_0_k" for b in blocks]
                t0 = time.monotonic()
                res = await c.batch_put_start(
                    cid, keys, [OBJ] * n, [{"parent_block_hash": p} for p in parents]
                )
                ledger.op("batch_put_start", t0)
                ok: list[str] = []
                for k, r in zip(keys, res):
                    if isinstance(r, MooncakeError):
                        if ledger.phase.expected(int(r.code)):
                            ledger.refused_in_phases += 1
                        elif int(r.code) not in _EXPECTED["batch_put_start"]:
                            ledger.error(f"batch_put_start:{r.code.name}")
                        break
                    ok.append(k)
                extra = [
                    k for k, r in zip(keys, res) if not isinstance(r, MooncakeError) and k not in ok
                ]
                if extra:
                    await c.batch_put_revoke(cid, extra)
                t0 = time.monotonic()
                resent = c.resent
                ends = await c.batch_put_end(cid, ok)
                ledger.op("batch_put_end", t0)
                for k, e in zip(ok, ends):
                    if e is None:
                        ledger.complete.add(k)
                    elif e.code == ErrorCode.OBJECT_NOT_FOUND and c.resent > resent:
                        # Sent again after a kill cut the first attempt: that one completed the
                        # object (lease 0) and eviction took it before the second arrived.
                        ledger.interrupted += 1
                    elif ledger.phase.expected(int(e.code)):
                        ledger.refused_in_phases += 1
                    else:
                        ledger.error(f"batch_put_end:{e.code.name}")
                chain.extend(k[:64] for k in ok)
                if len(ok) < n:
                    chain = []
                    await asyncio.sleep(0.02)
                if chain:
                    t0 = time.monotonic()
                    await c.batch_exist_key([b + "_0_k" for b in chain])
                    ledger.op("batch_exist_key", t0)
                    t0 = time.monotonic()
                    try:
                        await c.get_replica_list(chain[-1] + "_0_k")
                    except MooncakeError as exc:
                        if int(exc.code) not in _EXPECTED["get_replica_list"]:
                            raise
                    ledger.op("get_replica_list", t0)
                if rng.random() < 0.2:
                    root = blake3(f"chaosreg:{i}:{uuid.uuid4().hex}".encode()).hexdigest()
                    t0 = time.monotonic()
                    await c.batch_register_radix_tree_node([(root, "", [root])])
                    ledger.op("register", t0)
            except MooncakeError as exc:
                if ledger.phase.expected(int(exc.code)):
                    ledger.refused_in_phases += 1  # what a Redis outage or OOM phase does
                elif exc.code == ErrorCode.RPC_FAIL and killing:
                    # The worker serving this request was killed with it in flight; the
                    # client does not resend a call that may have been applied.
                    ledger.interrupted += 1
                else:
                    ledger.error(f"{exc.code.name}", str(exc))
                chain = []
                await asyncio.sleep(0.05)


PING_EVERY_S = 0.2  # the run's client ttl is 2 s: a few pings fit in it even on a loaded host


async def pinger(urls: list[str], stop: asyncio.Event) -> None:
    """Keeps both clients alive until ``stop`` is set, which the run sets once every worker
    and the evictor have exited: a client that stops pinging while a janitor still ticks is
    expired (the run's client ttl is 2 s) and its objects are lost, which is the janitor's job,
    not a loss for the store to answer for. Each client pings on its own, often, and a ping
    that fails or hangs (a worker killed under it, Redis down) is given up quickly and sent
    again on the next round, so that a ping lands soon after Redis answers again.

    The first pinger stopped with the load, while the Redis phases could still run past it and
    the workers went on ticking through their graceful stop (a blocking one: nothing pinged
    meanwhile); on a loaded host the janitor expired both clients 2 s later (segments_mounted 0,
    objects lost: 9 of 32 loaded runs). It also pinged the two clients one after the other,
    every 0.5 s, each ping with up to ~2 s of retry backoff, so that after an outage one
    client waited behind the other's retries."""
    from ..client import AsyncMasterClient
    from ..errors import MooncakeError

    async def keep_alive(client_id: str) -> None:
        async with AsyncMasterClient(urls, backoff_s=0.02, retries=1, timeout=1.0) as c:
            while not stop.is_set():
                with contextlib.suppress(MooncakeError):
                    await c.ping(client_id)
                await pause(stop, PING_EVERY_S)

    await asyncio.gather(*(keep_alive(f"chaos-client-{j}") for j in range(2)))
