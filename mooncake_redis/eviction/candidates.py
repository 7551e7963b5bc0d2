"""What the radix evictor reads and keeps between its reads: the candidate leaves (ordered for
its heap), the parents read ahead of their children, each shard's cursor in its leaf index, and
the read sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

MAX_REFILLS_PER_ROUND = 8
CHAIN_READ_AHEAD = 64  # at most this many nodes read up the chosen leaf's chain per call
# Read-ahead sizes: a row read and not used costs about as much Redis work as a tenth of a call
# (docs/benchmarks.md, "The eviction pass's reads"); smaller ones read fewer rows in more calls,
# the choices are the same (exact order refills whatever was not read).
PARENT_READ_AHEAD = 8  # parents of the next cheapest candidates read in the same call
SIDE_CHAIN_DEPTH = 2  # nodes read up each of those
LEAF_BYTES_GUESS = 4096  # bytes of a leaf, to size a pass's first read (more or fewer: refills)
# The first read takes 1 / INDEX_SHARE of the leaves a pass needs, plus FIRST_READ_SLACK: most
# of a pass's leaves are parents its picks exposed, read up their chains (evict_ancestors), not
# index entries. On the conversation trace 8 and 2 read 9 candidate rows a pass instead of 25
# for 0.6 more calls, and cost 5.8 % fewer Redis instructions (docs/benchmarks.md); a pass whose
# leaves all come from the index refills (windows doubling per shard), with the same choices.
INDEX_SHARE = 8
FIRST_READ_SLACK = 2


class Candidate(NamedTuple):
    """A leaf the pass may choose, ordered by (young, score, tie, seq): a tuple, so the heap
    compares in C (a dataclass's ``__lt__`` built two tuples per comparison, about half a million
    a 1,500-request replay); ``seq`` is unique, so no later field is ever compared."""

    young: bool  # the policy's grace: after every leaf that is not young
    score: float
    tie: str  # equal scores: the index's member order when the policy says so, else read order
    seq: int
    h: str
    shard: int
    s: float
    hits: int
    nbytes: int
    objects: int
    soft: bool
    parent: str
    pshard: int


@dataclass
class Ancestor:
    """A parent of a chosen leaf: evictable once ``children`` of its children are chosen."""

    status: str
    children: int
    candidate: Candidate | None


@dataclass
class ShardCursor:
    score: str = ""
    member: str = ""
    exhausted: bool = False
    k: int = 4  # window size (small: most passes evict a few leaves), doubled when it runs dry
    peek: tuple[str, str] | None = None  # not walked yet: its first unread entry

    @property
    def horizon(self) -> tuple[bool, float, str]:
        """No unread leaf of the shard sorts before this (index order: score, then member)."""
        if self.peek is not None:
            return (False, float(self.peek[0]), self.peek[1])
        return (False, float(self.score) if self.score else float("-inf"), self.member)
