"""Which puts of a chunk their commit links itself (``put_start``'s in-call link, FOLD_LINK)
rather than the link step (``radix_link``): the conditions are what keep that link as safe as
the link step's (docs/store.md "Step orders").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set

from .allocation import PutItem


def folded_puts(puts: Sequence[PutItem], limit: int, in_batch: Set[str]) -> set[int]:
    """The puts (their indices) whose commit links them, parent first, in the same script
    call: the parent block is in the same shard and is either an earlier put of the chunk
    (FOLD_LINK) or no block of the batch at all (FOLD_STORED: stored before the batch, which
    the commit checks, the put guard, in the same atomic call as the link), the shard's puts
    fit one call (``limit``, ``script_batch_size``: a longer group is split into calls, and
    a parent that is stored could be evicted between two of them), and the put's own block
    gets no child from the link step (whose shell parent would need the cycle check at its
    commit, a second round trip). So a chain put in one shard, the first block's link to
    its stored parent included, has no link step, no shell parents and no cycle check; a
    chain that crosses shards keeps the link step from its last crossing up. A parent in
    the batch but not an earlier put of the chunk (later, or in an earlier chunk) keeps the
    link step."""
    if not any(p.pshard == p.shard for p in puts):  # pshard -1: no parent
        return set()  # a cluster's batch, mostly: its chains cross shards
    shard_size = Counter(p.shard for p in puts)
    first: dict[str, int] = {}
    for n, p in enumerate(puts):
        first.setdefault(p.prefix, n)
    foldable = {
        n
        for n, p in enumerate(puts)
        if p.pshard == p.shard
        and shard_size[p.shard] <= limit
        and (first.get(p.cfg.parent_block_hash, n) < n or p.cfg.parent_block_hash not in in_batch)
    }
    # Blocks that the link step gives a child, until no fold is undone: a put is folded
    # only when none of its block's children (later puts, or earlier ones that cannot
    # fold) is linked by the link step.
    out = set(foldable)
    while out:
        linked_parents = {
            p.cfg.parent_block_hash
            for n, p in enumerate(puts)
            if p.cfg.parent_block_hash and n not in out
        }
        keep = {n for n in out if puts[n].prefix not in linked_parents}
        if keep == out:
            break
        out = keep
    return {puts[n].index for n in out}
