"""Wrapper of the upsert script on the shard tags: the classify-and-commit step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..context import Context, ShardItem
from ..records import _s


class UpsertCommit(NamedTuple):
    """One key's upsert step in its object shard (``upsert_start``)."""

    shard: int
    key: str
    put_id: str
    client_id: str
    size: int
    soft_pin: bool
    hard_pin: bool
    replicas: list[dict[str, Any]]  # reserved buffers as put_start's records; [] = none yet


class UpsertReply(NamedTuple):
    code: int  # 0 or a Mooncake code
    message: str
    mode: str  # 'absent' | 'alloc' | 'inplace' | 'new' | 'again'
    replicas: list[dict[str, Any]]  # the records written (modes 'inplace', 'new', 'again')


async def upsert_start(ctx: Context, commits: Sequence[UpsertCommit]) -> list[UpsertReply]:
    """``upsert_start``: one reply per commit, in order."""
    c = ctx.config
    head = [
        c.num_shards,
        c.alloc_commit_deadline_ms,
        c.put_start_release_timeout_ms,
        c.default_kv_soft_pin_ttl_ms,
    ]
    items: list[ShardItem] = [
        (
            x.shard,
            [
                x.key,
                x.put_id,
                x.client_id,
                str(x.size),
                1 if x.soft_pin else 0,
                1 if x.hard_pin else 0,
                json.dumps(x.replicas, separators=(",", ":")) if x.replicas else "",
            ],
        )
        for x in commits
    ]
    replies = await ctx.run_sharded_items("upsert_start", items, head)
    out: list[UpsertReply] = []
    for code, msg, mode, reps in replies:
        text = _s(reps)
        recs = json.loads(text) if text else []
        out.append(
            UpsertReply(int(code), _s(msg), _s(mode), recs if isinstance(recs, list) else [])
        )
    return out
