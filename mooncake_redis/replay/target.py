"""What a replay drives: the ReplayTarget protocol and a registry of target factories.

The driver must not know which store it measures, so every store (the real Mooncake master, our
Redis store in process or over HTTP, reference models) sits behind one async protocol and is
created by name from the same options.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..config import DEFAULT_EVICTION_POLICY


@dataclass(frozen=True, slots=True)
class PutItem:
    """One object to store; parent_block_hash is the parent BLOCK's hash ("" for a root)."""

    key: str
    parent_block_hash: str
    size: int


@runtime_checkable
class ReplayTarget(Protocol):
    """A store as HiCache sees it. All calls are batches of at most the driver's batch size."""

    name: str
    value_size: int
    """Bytes per object the target was sized for; the driver puts objects of this size."""

    async def batch_exist(self, keys: list[str]) -> list[bool]:
        """True for keys with a complete object; hits grant leases, as in Mooncake."""
        ...

    async def batch_put(self, items: list[PutItem]) -> list[bool]:
        """put_start + put_end per item; False when the store refused (e.g. no space)."""
        ...

    async def batch_get(self, keys: list[str]) -> list[bool]:
        """Read the objects (grants leases); True for each key that was read."""
        ...

    async def stored_keys(self) -> set[str]:
        """Every stored key, for sampling; must NOT grant leases or touch recency."""
        ...

    async def counters(self) -> dict[str, int]:
        """Cumulative counters: 'evictions' (rounds), 'evicted_keys', 'bytes_evicted', 'removed'."""
        ...

    async def close(self) -> None:
        """Release everything the target started (processes, connections)."""
        ...


@runtime_checkable
class VirtualClock(Protocol):
    """A target that keeps time by the trace instead of the wall clock (an in-memory model):
    the driver tells it when each request is sent at the replay's pacing and never sleeps."""

    def at(self, now_ms: float) -> None:
        """The request about to be replayed is sent at now_ms (trace time / speedup)."""
        ...


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """Everything a factory may need; each target uses what applies to it and ignores the rest."""

    capacity_blocks: int = 10_000
    objects_per_block: int = 1
    value_size: int = 4096
    policy: str = "radix"
    """radix | batch-evict (our store); the real Mooncake master is always batch-evict."""
    scoring: str = DEFAULT_EVICTION_POLICY
    """Radix scoring policy (our store and the model target); the store's default."""
    redis_url: str | None = None
    """None: the embedded store."""
    workers: int = 0
    """0: the in-process library; N > 0: N worker processes over HTTP."""
    lease_ttl_ms: int = 10_000
    eviction_high_watermark_ratio: float = 0.9
    eviction_ratio: float = 0.05
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def capacity_bytes(self) -> int:
        """Segment bytes so that capacity_blocks complete blocks fit."""
        return self.capacity_blocks * self.objects_per_block * self.value_size


TargetFactory = Callable[[TargetOptions], Awaitable[ReplayTarget]]

_REGISTRY: dict[str, TargetFactory | str] = {
    # Lazy entries ("module:function") so that importing the replay package never imports
    # an optional dependency; "redis" is where our own store's target is expected to live.
    "mooncake": "mooncake_redis.replay.mooncake_target:create_mooncake_target",
    "wire": "mooncake_redis.replay.wire_target:create_wire_target",
    "model": "mooncake_redis.replay.model_target:create_model_target",
    "redis": "mooncake_redis.replay.redis_target:create_target",
}


def register_target(name: str, factory: TargetFactory | str) -> None:
    """Register (or replace) a target: an async factory or a lazy "module:function" path."""
    _REGISTRY[name] = factory


def _resolve(name: str) -> TargetFactory | None:
    entry = _REGISTRY.get(name)
    if entry is None or not isinstance(entry, str):
        return entry
    module_name, _, attr = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return None  # the module itself is not written yet
        raise
    factory: TargetFactory = getattr(module, attr)
    _REGISTRY[name] = factory
    return factory


def available_targets() -> list[str]:
    """Names whose factory can be imported now (without starting anything)."""
    return [n for n in list(_REGISTRY) if _resolve(n) is not None]


async def create_target(name: str, options: TargetOptions) -> ReplayTarget:
    """Create a target by name; unknown or not-yet-available names list the available ones."""
    factory = _resolve(name)
    if factory is None:
        raise LookupError(
            f"replay target {name!r} is not available; available: {', '.join(available_targets())}"
        )
    return await factory(options)
