"""What fsck found: the problems, the counts, and which kinds a crash between protocol steps may
leave (the only ones a live store may show, and the ones repair may fix after a grace period)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Problems a crash between protocol steps may leave (repairable after the grace period).
ALLOWED_KINDS = frozenset({"dangling_edge", "stray_edge"})


@dataclass
class Problem:
    kind: str
    node: str
    detail: str
    age_ms: int | None = None
    repaired: bool = False
    members: list[str] = field(default_factory=list)  # a cycle's nodes


@dataclass
class FsckReport:
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    # What one check read and another needs (radix nodes, stored object keys); not reported.
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def clean(self) -> bool:
        return not [p for p in self.problems if not p.repaired]

    @property
    def only_allowed(self) -> bool:
        """Nothing but states the cross-shard protocol allows between its steps."""
        return all(p.kind in ALLOWED_KINDS or p.repaired for p in self.problems)

    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.problems:
            if not p.repaired:
                out[p.kind] = out.get(p.kind, 0) + 1
        return out

    def add(self, kind: str, node: str, detail: str, age_ms: int | None = None) -> Problem:
        problem = Problem(kind, node, detail, age_ms)
        self.problems.append(problem)
        return problem

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "counts": self.counts,
            "kinds": self.kinds(),
            "problems": [asdict(p) for p in self.problems],
        }
