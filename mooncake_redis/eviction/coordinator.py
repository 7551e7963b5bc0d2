"""One evictor at a time among all workers: a lease in Redis with a fencing epoch.

The lease (``{ns:g}:evictor``: holder, epoch, expires_ms) is taken with ``evictor_lease.lua``:
a holder renews it before it expires; anyone takes it over once it expired by Redis time, which
raises the epoch. Every writing eviction script gets (epoch, expiry) in ARGV and refuses when
the lease is over by Redis time or when its shard already saw a newer epoch (the shard's
``fence``), so a paused former leader cannot evict after losing the lease. A refusal raises
:class:`LeaseLost`: the pass stops and the coordinator steps down.

The janitor (client expiry, unfinished unmounts, stale puts, pending allocations, the outbox)
runs under the same lease, from the same loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .. import lua_calls as lua
from ..context import Context
from ..errors import ErrorCode, MooncakeError
from ..janitor import Janitor
from ..outage import FailureLog
from ..pausing import pause
from .metrics import EvictionResult

log = logging.getLogger("mooncake_redis.eviction")


class LeaseLost(MooncakeError):
    """The evictor lease is over or a newer epoch wrote: stop evicting."""

    def __init__(self, message: str = "evictor lease lost") -> None:
        super().__init__(ErrorCode.UNAVAILABLE_IN_CURRENT_STATUS, message)


def default_holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


LeaseState = lua.LeaseReply  # the lease as evictor_lease.lua answers it


class EvictorLease:
    """This process's view of the evictor lease."""

    def __init__(self, ctx: Context, holder: str | None = None, ttl_ms: int = 0) -> None:
        self.ctx = ctx
        self.holder = holder or default_holder_id()
        self.ttl_ms = ttl_ms or ctx.config.evictor_lease_ttl_ms
        self.epoch = 0
        self.expires_ms = 0
        self._deadline = 0.0  # local monotonic time at which the lease ends (conservative)
        self.flag = ""

    async def _call(self, op: str, epoch: int = 0, flag: str = "") -> LeaseState:
        return await lua.evictor_lease(self.ctx, op, self.holder, self.ttl_ms, epoch, flag)

    async def acquire(self) -> bool:
        """Take or renew the lease. False when another live holder has it."""
        t0 = time.monotonic()
        st = await self._call("acquire")
        self.flag = st.flag
        if not st.granted:
            self._deadline = 0.0
            return False
        new = st.epoch != self.epoch
        self.epoch, self.expires_ms = st.epoch, st.expires_ms
        # Counted from before the call: the lease may have started that early.
        self._deadline = t0 + (st.expires_ms - st.now_ms) / 1000.0
        if new:
            self.ctx.metrics.lease_acquired += 1
            log.info("evictor lease acquired by %s, epoch %d", self.holder, st.epoch)
            await self._raise_fences()
        return True

    async def _raise_fences(self) -> None:
        """A new epoch fences every shard before acting: no older epoch writes afterwards."""
        await lua.evict_fence(self.ctx, self.epoch)

    @property
    def held(self) -> bool:
        return self._deadline > time.monotonic()

    def remaining_s(self) -> float:
        return self._deadline - time.monotonic()

    async def ensure(self) -> None:
        """Before a writing step: renew when less than half the ttl is left; LeaseLost if gone."""
        if self.remaining_s() < self.ttl_ms / 2000.0 and not await self.acquire():
            self.lost()
        if not self.held:
            self.lost()

    def lost(self) -> None:
        self._deadline = 0.0
        self.ctx.metrics.lease_lost += 1
        raise LeaseLost(f"evictor lease of {self.holder} (epoch {self.epoch}) is over")

    def head(self) -> lua.Fence:
        """What every fenced script gets: epoch, lease expiry (Redis ms)."""
        return lua.Fence(self.epoch, self.expires_ms)

    async def release(self) -> None:
        if self.epoch:
            with contextlib.suppress(Exception):
                await self._call("release", self.epoch)
        self._deadline = 0.0

    async def clear_flag(self, value: str) -> bool:
        """Clears the "allocation failed" flag if it still has ``value`` and we hold the lease."""
        if not value:
            return False
        st = await self._call("clear", self.epoch, value)
        if st.granted and value == self.flag:
            self.flag = ""  # a holder between acquires does not clear it again
        return st.granted

    async def read(self) -> LeaseState:
        return await self._call("read")


class EvictionCoordinator:
    """The evictor and janitor loop of one worker (``serve --evictor auto``) or of a dedicated
    process (``mooncake-redis evictor``). Every worker may run one: they compete for the lease,
    the holder evicts and runs the janitor, the others wait and take over within about one lease
    ttl after the holder dies.

    Usage in a worker::

        coord = service.eviction_coordinator()   # MasterService builds it once
        coord.start()          # a background asyncio task
        ...
        await coord.stop()     # on shutdown: stops the loop and releases the lease
    """

    def __init__(
        self,
        ctx: Context,
        lease: EvictorLease,
        janitor_part: Janitor,
        run_pass: Callable[[EvictorLease], Awaitable[EvictionResult]],
        *,
        check_interval_ms: int = 20,
        janitor: bool = True,
    ) -> None:
        self.ctx = ctx
        self.lease = lease
        self.janitor_part = janitor_part
        self.run_pass = run_pass
        self.check_interval_s = check_interval_ms / 1000.0
        self.janitor = janitor
        self._last_janitor = 0.0
        self._last_tick = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.last_error: BaseException | None = None

    @property
    def is_leader(self) -> bool:
        return self.lease.held

    @property
    def running(self) -> bool:
        """Whether the loop was started (and not stopped): it keeps the lease between passes."""
        return self._task is not None

    async def step(self) -> dict[str, Any]:
        """One iteration: take or renew the lease; as holder, run the janitor when due and one
        eviction pass if the watermark (or an allocation failure) asks for it."""
        now = time.monotonic()
        interval = self.ctx.config.janitor_interval_ms / 1000.0
        if not await self.lease.acquire():
            if now - self._last_tick >= interval:
                # A follower still ticks: the service hears its clients through this worker.
                self._last_tick = now
                await self.janitor_part.heartbeat()
            return {"leader": False, "epoch": self.lease.epoch}
        out: dict[str, Any] = {"leader": True, "epoch": self.lease.epoch}
        if self.janitor and now - self._last_janitor >= interval:
            self._last_janitor = now
            self._last_tick = now
            await self.lease.ensure()
            rep = await self.janitor_part.run_janitor_once(force=True)  # ticks first
            self.ctx.metrics.janitor_runs += 1
            out["janitor"] = rep
        result = await self.run_pass(self.lease)
        out["eviction"] = result
        return out

    async def run(self) -> None:
        """Until :meth:`stop`: leader steps every check interval, followers poll the lease at a
        third of its ttl."""
        follow_s = self.lease.ttl_ms / 3000.0
        failures = FailureLog(log, f"evictor {self.lease.holder}", min(1.0, follow_s))
        try:
            while not self._stop.is_set():
                delay = follow_s
                try:
                    res = await self.step()
                    if res["leader"]:
                        delay = self.check_interval_s
                    self.last_error = None
                    failures.ok()
                except LeaseLost:
                    log.warning("evictor %s stepped down: lease lost", self.lease.holder)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # keep the role alive through transient errors
                    self.last_error = exc
                    delay = failures.failed(exc)  # one line per change of state, with backoff
                await pause(self._stop, delay)
        finally:
            await self.lease.release()

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._stop.clear()
            self._task = asyncio.create_task(self.run(), name="mooncake-evictor")
        return self._task

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
