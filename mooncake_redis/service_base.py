"""State and plumbing shared by the service's parts: config, keys, backend, sharded batching."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .backend import Backend, redact
from .config import SCHEMA_VERSION, Config
from .errors import ErrorCode, MooncakeError
from .keys import KeySchema
from .prefix import SCOPE, extract_prefix, split_scoped
from .records import _s

# A fault-injection hook: awaited at every named step boundary of a multi-tag operation.
FaultHook = Callable[[str], Awaitable[None]]

ShardItem = tuple[int, Sequence[Any]]


class ServiceBase:
    def __init__(self, backend: Backend, config: Config) -> None:
        self.backend = backend
        self.config = config
        self.keys = KeySchema(config.namespace, config.num_shards)
        self.fault_hook: FaultHook | None = None
        self._meta_ok = False  # set once this process found its settings recorded
        # Whether this process serves clients (its ticks show that the service hears them);
        # a standalone evictor does not.
        self.hears_clients = True
        self._oom_flagged_at = 0.0
        backend.on_oom = self._on_oom

    async def request_eviction(self, kind: str) -> None:
        """Raises the durable "eviction needed" flag: ``alloc`` (a put got no buffer) or
        ``oom`` (Redis refused a write for lack of memory). Works at maxmemory (allow-oom)."""
        await self.backend.call("evict_request", [self.keys.global_key("evict_needed")], [kind])

    async def _on_oom(self) -> None:
        now = time.monotonic()
        if now - self._oom_flagged_at >= 0.1:  # one flag write per burst of refusals
            self._oom_flagged_at = now
            await self.request_eviction("oom")

    def meta_argv(self) -> list[Any]:
        """What this process records in the namespace meta (schema, shard count, radix)."""
        return [SCHEMA_VERSION, self.config.num_shards, 1 if self.config.enable_radix_tree else 0]

    async def _check_meta(self) -> None:
        recorded = await self.backend.call(
            "meta_check", [self.keys.global_key("meta")], self.meta_argv()
        )
        self.compare_meta(recorded)

    def compare_meta(self, recorded: Sequence[Any]) -> None:
        """Raises INVALID_VERSION (and refuses every later call of this process) when the
        namespace was recorded with other settings than this process has."""
        version, shards, radix = (int(_s(x or b"-1")) for x in recorded[:3])
        mine = [int(x) for x in self.meta_argv()]
        if [version, shards, radix] == mine:
            self._meta_ok = True
            return
        err = MooncakeError(
            ErrorCode.INVALID_VERSION,
            f"namespace {self.config.namespace!r} was created with schema_version={version} "
            f"num_shards={shards} enable_radix_tree={bool(radix)}; this process has "
            f"schema_version={mine[0]} num_shards={mine[1]} enable_radix_tree={bool(mine[2])}. "
            "Use the recorded values or another namespace.",
        )
        if self.backend.refused is None and self._meta_ok:
            # Running already: the namespace was recorded anew by another process (Redis
            # restarted empty). Refuse everything from now on rather than mix two layouts.
            self.backend.refused = err
        raise err

    async def _open_existing(self) -> None:
        """Read-only open (fsck, inspect): writes nothing, refuses a namespace that does not
        exist, and takes the recorded shard count and radix setting."""
        raw = await self.backend.command(
            "HMGET", self.keys.global_key("meta"), "schema_version", "num_shards", "radix"
        )
        if raw[0] is None:
            raise MooncakeError(
                ErrorCode.OBJECT_NOT_FOUND,
                f"namespace {self.config.namespace!r} does not exist at {redact(self.backend.url)}",
            )
        version, shards, radix = (int(_s(x or b"0")) for x in raw)
        if version != SCHEMA_VERSION:
            self.compare_meta(raw)
        self.config = self.config.replace(num_shards=shards, enable_radix_tree=bool(radix))
        self.keys = KeySchema(self.config.namespace, shards)

    async def aclose(self) -> None:
        await self.backend.aclose()

    async def checkpoint(self, step: str) -> None:
        """A step boundary of a multi-tag protocol; tests inject crashes here."""
        if self.fault_hook is not None:
            await self.fault_hook(step)

    def prefix_of(self, key: str) -> str:
        # A tenant's key "\0T\0key" (tenants.py): the tenant's scope plus the key's prefix.
        if key.startswith(SCOPE):
            scoped = split_scoped(key)
            if scoped is not None:
                head = key[: len(key) - len(scoped[1])]
                return head + extract_prefix(scoped[1], self.config.key_hash_pattern)
        return extract_prefix(key, self.config.key_hash_pattern)

    def shard_of_key(self, key: str) -> int:
        return self.keys.shard_of(self.prefix_of(key))

    async def shard_totals(self, *fields: str) -> dict[str, int]:
        """Sums of the shards' stats counters (``evicted_keys``, ``objects``...), one pipeline."""
        pipe = self.backend.client.pipeline(transaction=False)
        for shard in range(self.keys.num_shards):
            pipe.hmget(self.keys.anchor(shard), *fields)
        totals = dict.fromkeys(fields, 0)
        for values in await pipe.execute():
            for name, v in zip(fields, values):
                totals[name] += int(v or 0)  # exact: byte counters may pass 2^53
        return totals

    async def run_sharded(
        self, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
    ) -> list[tuple[list[int], Any]]:
        """Run ``script`` over items grouped by shard: one call per node (per chunk of
        ``script_batch_size`` items), nodes in parallel. ``head``: per-call ARGV before the
        groups (ttl, timeouts, fencing epoch...).

        Returns (item indices in the call's ARGV order, raw reply) per call.
        """
        if not items:
            return []
        by_shard: dict[int, list[int]] = {}
        for i, (shard, _) in enumerate(items):
            by_shard.setdefault(shard, []).append(i)
        shards = list(by_shard)
        anchors = [self.keys.anchor(s) for s in shards]
        limit = self.config.script_batch_size

        async def run(node: Any, idx: list[int]) -> list[tuple[list[int], Any]]:
            out: list[tuple[list[int], Any]] = []
            keys: list[str] = []
            argv: list[Any] = []
            covered: list[int] = []

            async def flush() -> None:
                if keys:
                    # A cluster refuses declared keys of several slots: declare the first
                    # anchor only; the script reads every anchor from ARGV (see common.lua).
                    declared = keys[:1] if self.backend.cluster else keys
                    reply = await self.backend.call(
                        script, declared, [*head, len(keys), *argv], node
                    )
                    out.append((list(covered), reply))
                    keys.clear()
                    argv.clear()
                    covered.clear()

            for j in idx:
                shard = shards[j]
                members = by_shard[shard]
                for start in range(0, len(members), limit):
                    part = members[start : start + limit]
                    if covered and len(covered) + len(part) > limit:
                        await flush()
                    keys.append(anchors[j])
                    argv.extend((anchors[j], shard, len(part)))
                    for i in part:
                        argv.extend(items[i][1])
                    covered.extend(part)
            await flush()
            return out

        results = await self.backend.per_node(anchors, run)
        return [call for _, calls in results for call in calls]

    async def run_sharded_items(
        self, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
    ) -> list[Any]:
        """For scripts that reply one entry per item: the replies in ``items`` order."""
        out: list[Any] = [None] * len(items)
        for idx, reply in await self.run_sharded(script, items, head):
            for i, r in zip(idx, reply):
                out[i] = r
        return out
