"""Eviction: radix-aware leaf-first eviction, Mooncake's BatchEvict, one coordinator.

- :mod:`.policy`: leaf scores (``lru``, ``lru-freq``);
- :mod:`.goal`: what a pass works with (``EvictionDeps``) and when it may stop (``Goal``);
- :mod:`.radix_evict`: the radix pass (RFC section 3, no depth limit);
- :mod:`.orphans`: orphaned subtrees first; :mod:`.leaf_write`: the shared leaf write step;
- :mod:`.batch_evict`: Mooncake's BatchEvict (radix disabled, and the no-tree fallback);
- :mod:`.coordinator`: the evictor lease with a fencing epoch, the evictor/janitor loop;
- :mod:`.passes`: ``Eviction``, the part of the service (``evict_once``, the coordinator);
- :mod:`..cli.evictor`: ``mooncake-redis evictor``; :mod:`..bench.eviction`: ``bench-eviction``.

Nothing is imported here: the service's context imports :mod:`.metrics`, so this package's
``__init__`` must not pull in the parts that import the context.
"""
