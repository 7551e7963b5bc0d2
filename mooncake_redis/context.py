"""What every part of the service shares: the backend, key schema, config, the checkpoint hook,
the sharded-batch runner, the key -> shard memo and the eviction metrics.

One object per service, built first and handed to every part's constructor, so no part reaches
another through a common base class. The config and key schema may be replaced once, when a
read-only open, or a process that left the shard count to the store, adopts the namespace's
recorded layout (:meth:`adopt`): parts read them from here every time and never keep a copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .backend import Backend
from .config import Config
from .eviction.metrics import EvictionMetrics
from .keys import SHARD_MEMO_SIZE, KeySchema
from .prefix import HASH_LEN, SCOPE, extract_prefix, split_scoped

# A fault-injection hook: awaited at every named step boundary of a multi-tag operation.
FaultHook = Callable[[str], Awaitable[None]]

ShardItem = tuple[int, Sequence[Any]]


class Context:
    def __init__(self, backend: Backend, config: Config) -> None:
        self.backend = backend
        # num_shards 0: the topology's count until the namespace check finds one recorded
        # (Namespace.compare adopts it then, before any part has run).
        self.auto_shards = config.num_shards == 0
        if self.auto_shards:
            config = config.replace(num_shards=config.default_shards(backend.cluster))
        self.config = config
        self.keys = KeySchema(config.namespace, config.num_shards)
        self.fault_hook: FaultHook | None = None
        self.metrics = EvictionMetrics()
        # Whether this process serves clients (its ticks show that the service hears them);
        # a standalone evictor does not.
        self.hears_clients = True
        self._shards: dict[str, int] = {}
        self._anchors = [self.keys.anchor(i) for i in range(config.num_shards)]
        self._decimal = [str(i) for i in range(config.num_shards)]  # ARGV shard indices

    def adopt(self, config: Config) -> None:
        """Takes another layout (shard count, radix setting) before any part has run."""
        self.config = config
        self.keys = KeySchema(config.namespace, config.num_shards)
        self._shards = {}
        self._anchors = [self.keys.anchor(i) for i in range(config.num_shards)]
        self._decimal = [str(i) for i in range(config.num_shards)]  # ARGV shard indices

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
        shard = self._shards.get(key)
        if shard is None:
            shard = self.keys.shard_of(self.prefix_of(key))
            if len(self._shards) >= SHARD_MEMO_SIZE:
                self._shards.clear()
            self._shards[key] = shard
        return shard

    def note_shards(self, pairs: Sequence[tuple[str, int]]) -> None:
        """Records (key, shard) pairs a caller computed as :meth:`shard_of_key` does (the put's
        checks), so the later steps of those keys find them in the memo."""
        if len(self._shards) + len(pairs) > SHARD_MEMO_SIZE:
            self._shards.clear()
        self._shards.update(pairs)

    def shards_of_keys(self, keys: Sequence[str]) -> list[int]:
        """The shard of each key: one memo lookup per key, the hash only for keys not in it
        (those in one loop: a plain key's RFC Design 4 prefix inline, no call per key); on
        one shard, no lookup at all."""
        if self.keys.num_shards == 1:
            return [0] * len(keys)
        out: list[Any] = list(map(self._shards.get, keys))
        if None not in out:
            return out
        plain = self.config.key_hash_pattern is None
        shard_of = self.keys.shard_of
        found: list[tuple[str, int]] = []
        for j, (k, s) in enumerate(zip(keys, out)):
            if s is None:
                if plain and not k.startswith(SCOPE):
                    s = shard_of(k[:HASH_LEN] if k.find("_") == HASH_LEN else k)
                else:
                    s = self.keys.shard_of(self.prefix_of(k))
                out[j] = s
                found.append((k, s))
        self.note_shards(found)
        return out

    async def shard_totals(self, *fields: str) -> dict[str, int]:
        """Sums of the shards' stats counters (``evicted_keys``, ``objects``...), one pipeline."""
        pipe = self.backend.pipeline()
        for shard in range(self.keys.num_shards):
            pipe.hmget(self.keys.anchor(shard), *fields)
        totals = dict.fromkeys(fields, 0)
        for values in await self.backend.execute(pipe, "shard_totals"):
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
        # One pass: each group's item indices and its items' ARGV values together.
        by_shard: dict[int, list[int]] = {}
        values: dict[int, list[Any]] = {}
        get = by_shard.get
        for i, (shard, vals) in enumerate(items):
            group = get(shard)
            if group is None:
                by_shard[shard] = [i]
                values[shard] = list(vals)
            else:
                group.append(i)
                values[shard].extend(vals)

        def flat(shard: int, part: list[int]) -> list[Any]:
            if part is by_shard[shard]:  # a whole group (no chunking): its values as built
                return values[shard]
            return [v for i in part for v in items[i][1]]

        return await self._run_groups(script, by_shard, flat, head)

    async def run_every_shard(
        self, script: str, head: Sequence[Any] = (), values: Sequence[Any] = ()
    ) -> list[tuple[list[int], Any]]:
        """:meth:`run_sharded` with the same ``values`` (one item's, or none) for every shard, in
        shard order: on a single Redis whose shards fit one call, in the compact form that names
        shard 0 and the count (common.lua ``each_group``), else one group per shard."""
        n = self.keys.num_shards
        if self.backend.cluster or n > self.config.script_batch_size:
            return await self.run_sharded(script, [(sh, values) for sh in range(n)], head)
        count = 1 if values else 0
        reply = await self.backend.call(
            script, self._anchors[:1], [*head, "*", self._anchors[0], n, count, *values]
        )
        return [(list(range(n)), reply)]

    async def run_sharded_keys(
        self, script: str, keys: Sequence[str], head: Sequence[Any] = (), *extra: Any
    ) -> list[Any]:
        """:meth:`run_sharded_items` for items that are each a key and the same ``extra``
        values: the shards from the memo, the groups and ARGV built per batch, not per key."""
        if not keys:
            return []
        # One pass: each group's item indices and its keys together.
        by_shard: dict[int, list[int]] = {}
        grouped: dict[int, list[str]] = {}
        get = by_shard.get
        for i, (key, shard) in enumerate(zip(keys, self.shards_of_keys(keys))):
            group = get(shard)
            if group is None:
                by_shard[shard] = [i]
                grouped[shard] = [key]
            else:
                group.append(i)
                grouped[shard].append(key)

        def flat(shard: int, part: list[int]) -> list[Any]:
            if not extra:
                if part is by_shard[shard]:  # a whole group (no chunking): its keys as built
                    return grouped[shard]
                return list(map(keys.__getitem__, part))
            return [v for i in part for v in (keys[i], *extra)]

        return _in_order(len(keys), await self._run_groups(script, by_shard, flat, head))

    async def _run_groups(
        self,
        script: str,
        by_shard: dict[int, list[int]],
        flat: Callable[[int, list[int]], list[Any]],
        head: Sequence[Any],
    ) -> list[tuple[list[int], Any]]:
        """:meth:`run_sharded` once the items are grouped: shard -> item indices, and ``flat``
        giving the ARGV values of a shard's items (the whole group, or a chunk of it)."""
        shards = list(by_shard)
        anchors = [self._anchors[s] for s in shards]
        # A shard index goes as the decimal string Redis receives anyway (a str packs cheaper).
        names = [self._decimal[s] for s in shards]
        limit = self.config.script_batch_size
        n_items = sum(map(len, by_shard.values()))

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

            if n_items <= limit:  # the common case: one call, no chunking
                for j in idx:
                    members = by_shard[shards[j]]
                    keys.append(anchors[j])
                    argv += (anchors[j], names[j], len(members))
                    argv += flat(shards[j], members)
                    covered += members
            else:
                for j in idx:
                    shard = shards[j]
                    members = by_shard[shard]
                    for start in range(0, len(members), limit):
                        part = members[start : start + limit]
                        if covered and len(covered) + len(part) > limit:
                            await flush()
                        keys.append(anchors[j])
                        argv.extend((anchors[j], names[j], len(part)))
                        argv.extend(flat(shard, part))
                        covered.extend(part)
            await flush()
            return out

        results = await self.backend.per_node(anchors, run)
        return [call for _, calls in results for call in calls]

    async def run_sharded_items(
        self, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
    ) -> list[Any]:
        """For scripts that reply one entry per item: the replies in ``items`` order."""
        return _in_order(len(items), await self.run_sharded(script, items, head))

    async def run_segment_groups(
        self,
        script: str,
        groups: Sequence[tuple[str, Sequence[Any]]],
        head: Sequence[Any] = (),
        arity: int = 1,
    ) -> list[Any]:
        """One call per node over segment groups (segment id, its items flattened, ``arity``
        values an item); returns (group indices, reply) per call."""
        if not groups:
            return []
        anchors = [self.keys.segment_anchor(seg) for seg, _ in groups]
        limit = self.config.script_batch_size

        async def run(node: Any, idx: list[int]) -> list[Any]:
            replies: list[Any] = []
            for start in range(0, len(idx), limit):
                part = idx[start : start + limit]
                keys = [anchors[j] for j in part]
                argv: list[Any] = [*head, len(part)]
                for j in part:
                    data = groups[j][1]
                    argv.extend((anchors[j], len(data) // arity, *data))
                declared = keys[:1] if self.backend.cluster else keys
                replies.append((part, await self.backend.call(script, declared, argv, node)))
            return replies

        out: list[Any] = []
        for _, calls in await self.backend.per_node(anchors, run):
            out.extend(calls)
        return out


def _in_order(n: int, calls: Sequence[tuple[list[int], Any]]) -> list[Any]:
    """The per-item replies of grouped calls (item indices, one reply entry each) in item order."""
    out: list[Any] = [None] * n
    for idx, reply in calls:
        for i, r in zip(idx, reply):
            out[i] = r
    return out
