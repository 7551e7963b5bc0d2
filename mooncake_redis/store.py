"""The object store: segments and their allocators, objects, leases, clients, the janitor.

Three kinds of hash tag take part, so every operation is a sequence of single-tag script steps
ordered so that a crash between two steps leaves only a state something reclaims:

- put_start: reserve buffers in the segment tags (owner-tagged with key and put id, recorded as
  pending with Redis time) concurrently with the radix parent link, then commit the object in its
  shard. A crash in between leaves pending allocations: the janitor frees those whose owner never
  committed them (after ``alloc_reclaim_grace_ms``; the commit refuses allocations older than
  ``alloc_commit_deadline_ms``, which is shorter, so a slow commit never attaches a freed buffer).
- erase paths (revoke, remove, stale-put discard, unmount): one shard script deletes the object,
  unregisters it from the radix index (continuations come back for the parent shards) and pushes
  its buffer frees to the shard outbox; the caller then applies the frees to the allocators
  (``alloc_free``: idempotent, put-id checked) and acknowledges them (``outbox_ack``). A crash
  leaves entries in the outbox, which the janitor drains.
- unmount: the segment stops allocating (``mounted=0``), the replicas its allocation records
  name are dropped in their shards (a reservation not yet committed is vetoed instead), then the
  allocator and the registry entry go. Resumable: the janitor finishes unmounts left half done.
"""

from __future__ import annotations

from .allocation import SEGMENT_CACHE_S, AllocationMixin
from .janitor import JanitorMixin, JanitorReport
from .objects import MAX_REGEX_LEN, REGEX_TIMEOUT_S, ObjectsMixin
from .puts import ConfigArg
from .records import FreePair, _err, _s, parse_alloc_record, parse_entry
from .segments import SegmentsMixin

__all__ = [
    "MAX_REGEX_LEN",
    "REGEX_TIMEOUT_S",
    "SEGMENT_CACHE_S",
    "AllocationMixin",
    "ConfigArg",
    "FreePair",
    "JanitorMixin",
    "JanitorReport",
    "ObjectsMixin",
    "SegmentsMixin",
    "StoreMixin",
    "_err",
    "_s",
    "parse_alloc_record",
    "parse_entry",
]


class StoreMixin(ObjectsMixin, JanitorMixin, SegmentsMixin, AllocationMixin):
    """The whole object store, composed from its parts (see the module docstring)."""
