"""Parent inference for an unchanged client (``wire_infer_parents``): Mooncake's ReplicateConfig
carries no parent block hash, so the front end infers it from the order HiCache sends keys in.

HiCache asks ``BatchExistKey`` for every page key of a request in prefix order, then puts the
pages that missed (``BatchPutStart``). Page hashes are a hash chain (each page's hash covers the
previous page's hash), so the block before a block in such a list is its parent, whoever sent
the list. Hence:

- an exists call over blocks ``B0 .. Bn`` (consecutive keys with the same prefix are one block)
  records, for each block ``Bi`` (i > 0), the hint ``parent(Bi) = Bi-1``, in Redis
  with a short TTL (``wire_parent_hint_ttl_ms``; one script call per exists call, all hints
  under the global tag): the exists and the put of one request may reach different workers over
  different pooled connections, and the hint is a fact about the block, not about a client;
- in a put batch, a block's parent is its recorded hint, else the block before it in the batch
  (consecutive distinct prefixes form a chain), and the first block without a hint is a root.

A hint is only ever a parent edge passed to the store's put, which checks it as it checks an
explicit one: a wrong hint (keys that are not a hash chain, or listed out of order) whose parent
is stored makes the index keep that parent as long as the child lives, which no invariant
forbids; with ``radix_put_guard`` a put whose inferred parent is not stored (evicted since the
exists, its own put refused, or a wrong hint) is refused (OBJECT_NOT_FOUND), so the store never
holds an orphan. docs/wire.md lists when the inference is right and when not.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence

from ..lua_calls import parent_hints_put
from ..records import _s
from ..service import MasterService

LOCAL_HINTS = 200_000  # most hints one worker remembers itself (the rest are read from Redis)


class ParentHints:
    """Hints written by exists calls and read by puts; Redis is the truth, a bounded local
    map saves the read when this worker saw the exists itself."""

    def __init__(self, svc: MasterService, ttl_ms: int) -> None:
        self.svc = svc
        self.ttl_ms = ttl_ms
        self.pattern = svc.config.key_hash_pattern
        self.local: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.recorded = 0  # hints written by exists calls
        self.inferred = 0  # keys put under an inferred parent

    def blocks(self, keys: Sequence[str]) -> list[tuple[str, list[int]]]:
        """Consecutive keys of one prefix grouped: (prefix, key indexes), in order."""
        out: list[tuple[str, list[int]]] = []
        for i, k in enumerate(keys):
            p = self.svc.prefix_of(k) if isinstance(k, str) and k else ""  # tenant-scoped
            if out and out[-1][0] == p:
                out[-1][1].append(i)
            else:
                out.append((p, [i]))
        return out

    def _remember(self, pairs: Sequence[tuple[str, str]]) -> None:
        expires = time.monotonic() + self.ttl_ms / 1000.0
        for child, parent in pairs:
            self.local[child] = (parent, expires)
            self.local.move_to_end(child)
        while len(self.local) > LOCAL_HINTS:
            self.local.popitem(last=False)

    def _local(self, child: str) -> str | None:
        hit = self.local.get(child)
        if hit is None:
            return None
        if hit[1] < time.monotonic():
            del self.local[child]
            return None
        return hit[0]

    async def observe_exists(self, keys: Sequence[str]) -> None:
        """Records the parent of every block after the first (``new_pairs``, then
        ``record``)."""
        await self.record(self.new_pairs(keys))

    def new_pairs(self, keys: Sequence[str]) -> list[tuple[str, str]]:
        """The (block, parent) pairs of an exists call that Redis does not hold yet: a pair
        this worker wrote within the last half TTL is not written again, so hot prefixes cost
        nothing (and the exists call then runs alone, with no task beside it)."""
        pairs: list[tuple[str, str]] = []
        now = time.monotonic()
        fresh = now + self.ttl_ms / 2000.0
        prev = ""
        for prefix, _ in self.blocks(keys):
            if prev and prefix and prefix != prev:
                known = self.local.get(prefix)
                if known is None or known[0] != prev or known[1] < fresh:
                    pairs.append((prefix, prev))
            prev = prefix
        return pairs

    async def record(self, pairs: list[tuple[str, str]]) -> None:
        """Writes the pairs (one script call; runs beside the exists script, not after it)."""
        if not pairs:
            return
        self._remember(pairs)
        self.recorded += len(pairs)
        await parent_hints_put(self.svc.ctx, self.ttl_ms, pairs)

    async def parents(self, keys: Sequence[str]) -> list[str]:
        """The parent block hash to put each key under ("" for a root)."""
        blocks = self.blocks(keys)
        out = [""] * len(keys)
        if not blocks:
            return out
        first = blocks[0][0]
        first_parent = self._local(first) if first else None
        if first and first_parent is None:
            raw = await self.svc.backend.command("GET", self.svc.keys.parent_hint(first))
            first_parent = _s(raw) if raw is not None else ""
        prev = ""
        for n, (prefix, idx) in enumerate(blocks):
            parent = first_parent if n == 0 else self._local(prefix)
            if parent is None:
                parent = prev
            if parent and parent != prefix:
                self.inferred += len(idx)
                for i in idx:
                    out[i] = parent
            prev = prefix
        return out
