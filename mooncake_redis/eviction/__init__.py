"""Eviction: radix-aware leaf-first eviction, Mooncake's BatchEvict, one coordinator.

- :mod:`.policy`: leaf scores (``lru``, ``lru-freq``);
- :mod:`.radix_evict`: the radix pass (RFC section 3, no depth limit);
- :mod:`.batch_evict`: Mooncake's BatchEvict (radix disabled, and the no-tree fallback);
- :mod:`.coordinator`: the evictor lease with a fencing epoch, the evictor/janitor loop;
- :mod:`.mixin`: ``EvictionMixin`` (``evict_once``, ``usage``, ``eviction_coordinator``);
- :mod:`..cli.evictor`: ``mooncake-redis evictor``; :mod:`..bench.eviction`: ``bench-eviction``.
"""

from .coordinator import EvictionCoordinator, EvictorLease, LeaseLost
from .metrics import EvictionMetrics, EvictionResult
from .mixin import EvictionMixin, Usage
from .policy import LeafPolicy, LruFreqPolicy, get_policy

__all__ = [
    "EvictionCoordinator",
    "EvictionMetrics",
    "EvictionMixin",
    "EvictionResult",
    "EvictorLease",
    "LeafPolicy",
    "LeaseLost",
    "LruFreqPolicy",
    "Usage",
    "get_policy",
]
