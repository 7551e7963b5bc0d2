"""fsck: every invariant checked over the whole namespace, and the repairs the protocol allows.

The check sets run in a fixed order, named here rather than registered on import: the radix
checks (:mod:`.radix`), the object store's (:mod:`.store`), then the orphan check
(:mod:`.orphans`), which reads the nodes and stored keys the first two cached in the report.
Repair is the radix repair alone (it also fixes the orphan index): the store's problems are
reported, never repaired by fsck (the janitor reclaims what a crash leaves there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .orphans import check_orphans
from .radix import check_radix, load_leaves, load_nodes, repair_radix
from .report import ALLOWED_KINDS, FsckReport, Problem
from .store import check_store

if TYPE_CHECKING:
    from ..service import MasterService

__all__ = [
    "ALLOWED_KINDS",
    "CHECKS",
    "FsckReport",
    "Problem",
    "check_orphans",
    "check_radix",
    "check_store",
    "fsck",
    "load_leaves",
    "load_nodes",
]

# In this order: the orphan check reads what the other two cached.
CHECKS = (check_radix, check_store, check_orphans)


async def fsck(
    service: MasterService, repair: bool = False, grace_ms: int | None = None
) -> FsckReport:
    """Check every invariant; with ``repair``, fix what is safe to fix (the report marks what
    was repaired)."""
    grace = service.config.dangling_edge_grace_ms if grace_ms is None else grace_ms
    report = FsckReport()
    now = await service.backend.time_ms()
    for check in CHECKS:
        await check(service, report, now)
    if repair and (
        report.problems or report.cache.get("orphan_unindexed") or report.cache.get("orphan_stale")
    ):
        await repair_radix(service, report, grace)
    return report
