"""GetReplicaListByRegex in the store: complete objects only, leases granted, patterns checked
as RemoveByRegex checks them."""

from __future__ import annotations

from typing import Any

import pytest

from mooncake_redis.errors import ErrorCode, MooncakeError
from mooncake_redis.models import Segment


async def test_get_replica_list_by_regex(make_service: Any) -> None:
    svc = await make_service()
    await svc.mount_segment(Segment("seg-0", "seg-0", 1 << 40, 1 << 20), "c")
    for k in ("page-0", "page-1", "other"):
        await svc.put_start("c", k, [64])
        await svc.put_end("c", k)
    await svc.put_start("c", "page-2", [64])  # PROCESSING: not listed
    found = await svc.get_replica_list_by_regex("^page-")
    assert sorted(found) == ["page-0", "page-1"]
    assert all(len(r.replicas) == 1 and r.replicas[0].status == "COMPLETE" for r in found.values())
    with pytest.raises(MooncakeError) as exc:
        await svc.remove("page-0")  # the listing granted a lease
    assert exc.value.code == ErrorCode.OBJECT_HAS_LEASE
    assert await svc.get_replica_list_by_regex("^nothing$") == {}
    for bad in ("(", "x" * 1025):
        with pytest.raises(MooncakeError) as exc:
            await svc.get_replica_list_by_regex(bad)
        assert exc.value.code == ErrorCode.INVALID_PARAMS
