"""State probes shared by the reliability tests and the chaos run.

- :func:`snapshot`: every key of a namespace with its value, to show that a rejected request or
  an interrupted operation changed nothing it should not have;
- :func:`complete_objects`: the COMPLETE objects (key -> put id), to count lost objects;
- :func:`violations`: fsck problems that are not allowed between protocol steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..service import MasterService


def _s(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


async def namespace_keys(service: MasterService) -> list[str]:
    """Every Redis key of the service's namespace (all primaries on a cluster)."""
    client = service.backend.client
    pattern = "{" + service.config.namespace + ":*"
    out = [_s(k) async for k in client.scan_iter(match=pattern, count=1000)]
    return sorted(set(out))


async def _value(client: Any, key: str) -> Any:
    kind = _s(await client.type(key))
    if kind == "hash":
        return kind, sorted((_s(k), _s(v)) for k, v in (await client.hgetall(key)).items())
    if kind == "set":
        return kind, sorted(_s(m) for m in await client.smembers(key))
    if kind == "zset":
        return kind, sorted(
            (_s(m), float(s)) for m, s in await client.zrange(key, 0, -1, withscores=True)
        )
    if kind == "list":
        return kind, [_s(m) for m in await client.lrange(key, 0, -1)]
    if kind == "string":
        return kind, _s(await client.get(key))
    return kind, None


async def snapshot(service: MasterService, skip: Iterable[str] = ("janitor",)) -> dict[str, Any]:
    """Key -> (type, value) of the whole namespace. ``skip``: global keys that change on their
    own (the janitor's run marker) and are left out. Shard counters at 0 count as absent (a
    refused call may create a shard's stats hash with zero counters)."""
    client = service.backend.client
    ignored = {service.keys.global_key(name) for name in skip}
    out: dict[str, Any] = {}
    for k in await namespace_keys(service):
        if k in ignored:
            continue
        kind, value = await _value(client, k)
        if k.endswith("}:stats"):  # a counter at 0 is the same as no counter
            value = [(f, v) for f, v in value if v != "0"]
            if not value:
                continue
        out[k] = (kind, value)
    return out


async def wipe(service: MasterService) -> None:
    """Deletes every key of the namespace (tests that reuse one service between examples)."""
    client = service.backend.client
    for k in await namespace_keys(service):
        await client.delete(k)
    await service.check_meta()


def snapshot_diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Human-readable differences between two snapshots (empty = identical)."""
    out = []
    for k in sorted(before.keys() | after.keys()):
        if before.get(k) != after.get(k):
            out.append(f"{k}: {before.get(k)!r} -> {after.get(k)!r}")
    return out


async def complete_objects(service: MasterService) -> dict[str, str]:
    """Key -> put id of every object whose state is COMPLETE."""
    return await service.complete_objects()


async def violations(service: MasterService) -> list[str]:
    """fsck problems that the cross-shard protocols never leave between their steps."""
    from ..fsck import fsck

    report = await fsck(service)
    return [f"{p.kind}: {p.detail}" for p in report.problems if not _allowed(p.kind)]


def _allowed(kind: str) -> bool:
    from ..fsck import ALLOWED_KINDS

    return kind in ALLOWED_KINDS
