"""``serve --evictor auto``: the worker runs the eviction coordinator as a background task.

The worker calls ``start(service, metrics)`` once its service is up and ``await handle.stop()``
on shutdown (stops the loop and releases the lease). Every pass result also feeds the worker's
Prometheus metrics (``eviction_passes``, ``evicted_by_me``, ``cascade_depth`` when present).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .coordinator import EvictionCoordinator
from .metrics import EvictionResult

if TYPE_CHECKING:
    from .mixin import EvictionMixin


def start(
    service: EvictionMixin, metrics: Any = None, *, check_interval_ms: int = 20
) -> EvictionCoordinator:
    coord = service.eviction_coordinator(check_interval_ms=check_interval_ms)
    if metrics is not None:

        def export(r: EvictionResult) -> None:
            passes = getattr(metrics, "eviction_passes", None)
            if passes is not None:
                passes.inc()
            evicted = getattr(metrics, "evicted_by_me", None)
            if evicted is not None and r.evicted_objects:
                evicted.inc(r.evicted_objects)
            depth = getattr(metrics, "cascade_depth", None)
            if depth is not None and r.mode == "radix":
                depth.observe(r.cascade_depth)

        service.eviction_metrics.add_listener(export)
    coord.start()
    return coord
