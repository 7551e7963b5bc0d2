"""The namespace's recorded settings (schema, shard count, radix) and the OOM flag hook.

Every process compares its settings with what the namespace recorded, at start, at every tick
and at every ping: a namespace recorded anew with other settings (Redis restarted empty and
another process came first) is refused for good rather than served with two layouts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from . import lua_calls as lua
from .backend import redact
from .config import SCHEMA_VERSION
from .context import Context
from .errors import ErrorCode, MooncakeError
from .records import _s


class Namespace:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._meta_ok = False  # set once this process found its settings recorded
        self._oom_flagged_at = 0.0
        ctx.backend.on_oom = self._on_oom

    def meta(self) -> lua.Meta:
        """What this process records in the namespace meta (schema, shard count, radix)."""
        c = self.ctx.config
        return lua.Meta(SCHEMA_VERSION, c.num_shards, 1 if c.enable_radix_tree else 0)

    async def check(self) -> None:
        """Records the settings on first use, else compares them (INVALID_VERSION)."""
        self.compare(await lua.meta_check(self.ctx, self.meta()))

    def compare(self, recorded: Sequence[Any]) -> None:
        """Raises INVALID_VERSION (and refuses every later call of this process) when the
        namespace was recorded with other settings than this process has."""
        version, shards, radix = (int(_s(x or b"-1")) for x in recorded[:3])
        mine = list(self.meta())
        if [version, shards, radix] == mine:
            self._meta_ok = True
            return
        ctx = self.ctx
        if (
            ctx.auto_shards
            and not self._meta_ok
            and [version, radix] == [mine[0], mine[2]]
            and shards >= 1  # Config checks the rest; 0 would mean "by topology" again
        ):
            # The shard count was left to the store: take the recorded one (first check only,
            # before any part has run; later, a namespace recorded anew is refused below).
            ctx.adopt(ctx.config.replace(num_shards=shards))
            self._meta_ok = True
            return
        ns = ctx.config.namespace
        advice = (
            "Use the recorded values (num_shards 0 adopts the recorded count) or another namespace."
        )
        if version != mine[0]:
            # Another layout: no setting of this process can read it (no migration exists).
            advice = (
                f"This version keeps schema_version={mine[0]} and cannot read a namespace of "
                f"schema_version={version} (another key layout; nothing is migrated): drop the "
                f"namespace (delete its keys, e.g. redis-cli --scan --pattern '{{{ns}:*' | "
                "xargs redis-cli unlink) or use another namespace name (MOONCAKE_REDIS_NAMESPACE)."
            )
        err = MooncakeError(
            ErrorCode.INVALID_VERSION,
            f"namespace {ns!r} was created with schema_version={version} "
            f"num_shards={shards} enable_radix_tree={bool(radix)}; this process has "
            f"schema_version={mine[0]} num_shards={mine[1]} enable_radix_tree={bool(mine[2])}. "
            + advice,
        )
        if self.ctx.backend.refused is None and self._meta_ok:
            # Running already: the namespace was recorded anew by another process (Redis
            # restarted empty). Refuse everything from now on rather than mix two layouts.
            self.ctx.backend.refused = err
        raise err

    async def open_existing(self) -> None:
        """Read-only open (fsck, inspect): writes nothing, refuses a namespace that does not
        exist, and takes the recorded shard count and radix setting."""
        ctx = self.ctx
        f = lua.META_FIELDS
        raw = await ctx.backend.command(
            "HMGET", ctx.keys.global_key("meta"), f["schema_version"], f["num_shards"], f["radix"]
        )
        if raw[0] is None:
            raise MooncakeError(
                ErrorCode.OBJECT_NOT_FOUND,
                f"namespace {ctx.config.namespace!r} does not exist at {redact(ctx.backend.url)}",
            )
        version, shards, radix = (int(_s(x or b"0")) for x in raw)
        if version != SCHEMA_VERSION:
            self.compare(raw)
        ctx.adopt(ctx.config.replace(num_shards=shards, enable_radix_tree=bool(radix)))

    async def _on_oom(self) -> None:
        now = time.monotonic()
        if now - self._oom_flagged_at >= 0.1:  # one flag write per burst of refusals
            self._oom_flagged_at = now
            await lua.evict_request(self.ctx, "oom")
