"""A segment mounted through one worker is usable at once through another, however recently
that worker read its copy of the segment registry (found by the wire kill test: a put right
after a mount reached another worker, failed with NO_AVAILABLE_HANDLE, and the eviction flag
that raised evicted live objects)."""

from __future__ import annotations

from typing import Any

from mooncake_redis.models import Segment


async def test_a_fresh_mount_is_seen_by_a_worker_with_a_fresh_registry(make_service: Any) -> None:
    a = await make_service()
    b = await make_service()
    assert await b.segment_stats() == []  # b's copy of the registry: read just now, empty
    await a.mount_segment(Segment("seg-0", "seg-0", 1 << 40, 1 << 20), "client-a")
    [reps] = await b.batch_put_start("client-a", ["k"], [[4096]])
    assert not isinstance(reps, Exception), reps
    assert await b.backend.client.get(b.keys.global_key("evict_needed")) is None
