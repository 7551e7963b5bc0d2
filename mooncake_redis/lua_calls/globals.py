"""Wrappers of the scripts on the global tag ``{<ns>:g}``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..context import Context
from ..keys import HASH_FIELDS
from ..records import _s

META_FIELDS = HASH_FIELDS["meta"]


class Meta(NamedTuple):
    """What a process records in (and compares with) the namespace meta."""

    schema_version: int
    num_shards: int
    radix: int  # 1 / 0


class PingReply(NamedTuple):
    view_version: int
    status: str  # 'OK' | 'NEED_REMOUNT'
    recorded: tuple[str, str, str]  # schema version, shard count, radix as recorded


class TickReply(NamedTuple):
    recorded: tuple[str, str, str]
    now_ms: int
    since_ms: int
    turn: bool  # this call won the janitor's turn


class ClientsExpired(NamedTuple):
    now_ms: int
    segments: list[tuple[str, str]]  # (segment id, client id) to unmount
    claimed: list[str]  # clients claimed by this call


class LeaseReply(NamedTuple):
    granted: bool
    epoch: int
    expires_ms: int
    holder: str
    now_ms: int
    flag: str  # the evict_needed flag ('' = not set)


def _recorded(raw: list[object]) -> tuple[str, str, str]:
    a, b, c = (_s(x if x is not None else b"-1") for x in raw[:3])
    return a, b, c


async def meta_check(ctx: Context, mine: Meta) -> tuple[str, str, str]:
    """``meta_check``: records ``mine`` on first use; the recorded settings."""
    raw = await ctx.backend.call("meta_check", [ctx.keys.global_key("meta")], list(mine))
    return _recorded(raw)


async def client_ping(ctx: Context, client_id: str, mine: Meta) -> PingReply:
    """``client_ping``: refreshes a known client (a hearing tick)."""
    g = ctx.keys.global_key
    view, status, *recorded = await ctx.backend.call(
        "client_ping",
        [g("clients"), g("meta"), g("heartbeat")],
        [client_id, *mine, ctx.config.heartbeat_gap],
    )
    return PingReply(int(_s(view)), _s(status), _recorded(recorded))


async def service_tick(
    ctx: Context, mine: Meta, *, hearing: bool, janitor_interval_ms: int, token: str
) -> TickReply:
    """``service_tick``: a hearing tick, the meta again, the janitor's turn (interval 0: none)."""
    g = ctx.keys.global_key
    *recorded, now, since, turn = await ctx.backend.call(
        "service_tick",
        [g("meta"), g("heartbeat"), g("janitor")],
        [*mine, 1 if hearing else 0, ctx.config.heartbeat_gap, janitor_interval_ms, token],
    )
    return TickReply(_recorded(recorded), int(now), int(since or 0), bool(int(turn)))


async def evict_request(ctx: Context, kind: str) -> None:
    """``evict_request``: the durable "eviction needed" flag (``alloc`` or ``oom``)."""
    await ctx.backend.call("evict_request", [ctx.keys.global_key("evict_needed")], [kind])


async def segment_register(ctx: Context, segment_id: str, client_id: str) -> tuple[int, str]:
    """``segment_register``: (code, message) of the registry step of a mount."""
    g = ctx.keys.global_key
    code, msg = await ctx.backend.call(
        "segment_register",
        [g("segments"), g("clients"), g("expiring"), g("heartbeat")],
        [segment_id, client_id, ctx.config.heartbeat_gap],
    )
    return int(code), _s(msg)


async def segment_deregister(ctx: Context, segment_id: str, client_id: str = "") -> bool:
    """``segment_deregister``: drops the entry if it names ``client_id`` ('' = any)."""
    dropped = await ctx.backend.call(
        "segment_deregister", [ctx.keys.global_key("segments")], [segment_id, client_id]
    )
    return bool(int(dropped))


async def clients_expired(ctx: Context) -> ClientsExpired:
    """``clients_expired``: claims the clients silent past the live ttl of heard time."""
    g = ctx.keys.global_key
    c = ctx.config
    now, segs, claimed, _hearing = await ctx.backend.call(
        "clients_expired",
        [g("segments"), g("clients"), g("heartbeat"), g("expiring")],
        [c.client_live_ttl_ms, c.heartbeat_gap, c.script_batch_size],
    )
    pairs = [(_s(segs[i]), _s(segs[i + 1])) for i in range(0, len(segs), 2)]
    return ClientsExpired(int(now), pairs, [_s(x) for x in claimed])


async def clients_remove(ctx: Context) -> int:
    """``clients_remove``: forgets expired clients that no segment names any more."""
    g = ctx.keys.global_key
    n = await ctx.backend.call(
        "clients_remove", [g("expiring"), g("segments")], [ctx.config.script_batch_size]
    )
    return int(n)


async def evictor_lease(
    ctx: Context, op: str, holder: str, ttl_ms: int, epoch: int = 0, flag: str = ""
) -> LeaseReply:
    """``evictor_lease``: ``acquire`` / ``release`` / ``read`` / ``clear`` (the flag)."""
    g = ctx.keys.global_key
    extra: list[object] = [] if op in ("acquire", "read") else [epoch]
    if op == "clear":
        extra.append(flag)
    granted, ep, expires, who, now, value = await ctx.backend.call(
        "evictor_lease", [g("evictor"), g("evict_needed")], [op, holder, ttl_ms, *extra]
    )
    return LeaseReply(bool(int(granted)), int(ep), int(expires), _s(who), int(now), _s(value))


async def parent_hints_put(ctx: Context, ttl_ms: int, hints: Sequence[tuple[str, str]]) -> int:
    """``parent_hints_put``: (child block, parent block) hints of the wire front end, with a
    ttl; the number written."""
    flat = [x for pair in hints for x in pair]
    n = await ctx.backend.call("parent_hints_put", [ctx.keys.global_key("meta")], [ttl_ms, *flat])
    return int(n)


async def te_metadata_put(ctx: Context, key: str, value: bytes) -> str:
    """``te_metadata_put``: 'updated', 'unchanged' or 'duplicate' (rpc_meta keys are set once)."""
    outcome = await ctx.backend.call(
        "te_metadata_put", [ctx.keys.global_key("te_metadata")], [key, value]
    )
    return _s(outcome)
