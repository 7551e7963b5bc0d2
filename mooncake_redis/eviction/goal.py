"""What an eviction pass works with (:class:`EvictionDeps`) and when it may stop (:class:`Goal`).

The evictors (radix, orphans, BatchEvict) and the shared leaf write step take these two, never
the service: they need the context (scripts, keys, config, checkpoints, metrics), the radix
index (cross-shard unlinks, node reads) and the allocators (frees), nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from ..allocation import Allocator
from ..context import Context
from ..lua_calls import ClockAsk
from ..radix import RadixIndex
from ..segments import Usage
from .metrics import EvictionResult


class EvictionDeps(NamedTuple):
    ctx: Context
    radix: RadixIndex
    allocator: Allocator


class Goal:
    """When a pass may stop: the used ratio back at or below ``ratio`` (re-read between rounds,
    over the segments the pass started with: one mounted meanwhile counts from the next pass)
    with at least ``min_free`` bytes freed; or, for ``max_objects``, that many objects evicted."""

    def __init__(
        self,
        read_usage: Callable[[Sequence[str] | None], Awaitable[Usage]],
        result: EvictionResult,
        usage: Usage,
        ratio: float,
        min_free: int = 0,
        max_objects: int | None = None,
        publish_clocks: bool = False,
    ) -> None:
        self.read_usage = read_usage
        self.result = result
        self.usage = usage
        self.ratio = ratio
        self.min_free = min_free
        self.max_objects = max_objects
        self.publish_clocks = publish_clocks
        """the pass publishes the tiered policy's clocks once it ends"""
        self.published: int | None = None
        """the pass's evicted leaves when an eviction call last published the clocks, having
        met the goal (None: none did): the pass then publishes only what came after"""

    @property
    def used(self) -> float:
        return self.usage.ratio

    @property
    def segments(self) -> tuple[str, ...]:
        """The segments the pass started with (its used ratio is over them)."""
        return self.usage.segments

    async def refresh(self, read: Usage | None = None) -> None:
        """The used ratio after a write: ``read`` when the write step read it after its frees
        (evict_leaves on a single Redis), else read now."""
        self.usage = read or await self.read_usage(self.usage.segments or None)

    def need(self) -> tuple[int, int]:
        """(bytes, objects) still to evict."""
        if self.max_objects is not None:
            return 0, max(0, self.max_objects - self.result.evicted_objects)
        over = self.usage.allocated - int(self.ratio * self.usage.capacity)
        return max(over, self.min_free - self.result.bytes, 0), 0

    def satisfied(self) -> bool:
        b, o = self.need()
        return b <= 0 and o <= 0

    def clock_ask(self) -> ClockAsk | None:
        """What an eviction call needs to tell, from this goal's numbers, that it met the goal
        and may publish the clocks for the pass (None: the pass publishes none)."""
        if not self.publish_clocks:
            return None
        r = self.result
        objects = None if self.max_objects is None else self.max_objects - r.evicted_objects
        unpublished = r.evicted_leaves - (self.published or 0)
        return ClockAsk(unpublished, self.ratio, self.min_free - r.bytes, objects)
