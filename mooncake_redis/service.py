"""``MasterService``: the facade over the service's parts, one delegate per RPC.

The parts, built here in their one direction (each given what it needs in its constructor,
nothing reaches back):

    Context                      backend, keys, config, checkpoints, sharded batches, metrics
    Namespace(ctx)               the recorded settings, the OOM flag hook
    RadixIndex(ctx)              the radix index
    Allocator(ctx)               the segment allocators
    Segments(ctx, namespace, radix, allocator)
    Puts(ctx, radix, allocator)
    Objects(ctx, puts)
    Janitor(ctx, namespace, radix, allocator, segments)
    Eviction(ctx, radix, allocator, segments, janitor)
    Upserts(ctx, puts, allocator)
    TenantScope(config, objects, puts, upserts, tenant)   a view, per call of tenant()

The server, the wire front end, the clients and the tools call this object only; the parts are
also reachable (``svc.puts``, ``svc.eviction``...) for tests and tools that need an internal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .allocation import Allocator
from .backend import Backend
from .config import Config
from .context import Context, FaultHook, ShardItem
from .errors import MooncakeError
from .eviction.coordinator import EvictionCoordinator, EvictorLease
from .eviction.metrics import EvictionMetrics, EvictionResult
from .eviction.passes import Eviction
from .janitor import Janitor, JanitorReport
from .keys import KeySchema
from .models import GetReplicaListResponse, PingResponse, ReplicaDescriptor, Segment, SegmentStats
from .namespace import Namespace
from .objects import Objects
from .put_checks import ConfigArg
from .puts import Puts
from .radix import RadixIndex
from .segments import Segments, Usage
from .tenants import TenantScope
from .types import RadixNode, RegisterItem, SubtreeResult
from .upserts import Upserts


class MasterService:
    """Stateless: every worker may build one over the same Redis; nothing lives only here."""

    def __init__(self, backend: Backend, config: Config) -> None:
        self.ctx = ctx = Context(backend, config)
        self.namespace = Namespace(ctx)
        self.radix = RadixIndex(ctx)
        self.allocator = Allocator(ctx)
        self.segments = Segments(ctx, self.namespace, self.radix, self.allocator)
        self.puts = Puts(ctx, self.radix, self.allocator)
        self.objects = Objects(ctx, self.puts)
        self.janitor = Janitor(ctx, self.namespace, self.radix, self.allocator, self.segments)
        self.eviction = Eviction(ctx, self.radix, self.allocator, self.segments, self.janitor)
        self.upserts = Upserts(ctx, self.puts, self.allocator)

    @classmethod
    async def from_url(
        cls,
        url: str | None = None,
        config: Config | None = None,
        *,
        create: bool = True,
        **redis_kwargs: Any,
    ) -> MasterService:
        """Connects and checks the namespace's recorded settings (recording them on first use).
        ``create=False`` (fsck, inspect): writes nothing, refuses a namespace that does not
        exist (OBJECT_NOT_FOUND) and adopts its recorded shard count and radix setting."""
        config = config or Config()
        backend = Backend.from_url(url or config.redis_url, **redis_kwargs)
        service = cls(backend, config)
        try:
            await backend.connect()
            if create:
                await service.namespace.check()
                await service.eviction.record_policy()
            else:
                await service.namespace.open_existing()
        except BaseException:
            await backend.aclose()
            raise
        return service

    async def aclose(self) -> None:
        await self.ctx.backend.aclose()

    def tenant(self, tenant_id: str) -> TenantScope:
        """The object RPCs of one tenant (``"default"``: today's keys, unchanged)."""
        return TenantScope(self.config, self.objects, self.puts, self.upserts, tenant_id)

    async def upsert_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        return await self.upserts.upsert_start(client_id, key, slice_lengths, config)

    async def batch_upsert_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        return await self.upserts.batch_upsert_start(client_id, keys, slice_lengths, config)

    # UpsertEnd and UpsertRevoke are PutEnd and PutRevoke (as in Mooncake's master).
    async def upsert_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.puts.put_end(client_id, key, replica_type)

    async def batch_upsert_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.puts.batch_put_end(client_id, keys, replica_type)

    async def upsert_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.puts.put_revoke(client_id, key, replica_type)

    async def batch_upsert_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.puts.batch_put_revoke(client_id, keys, replica_type)

    async def __aenter__(self) -> MasterService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- what the worker, tools and tests read --------------------------------------------------
    @property
    def backend(self) -> Backend:
        return self.ctx.backend

    @property
    def config(self) -> Config:
        return self.ctx.config

    @property
    def keys(self) -> KeySchema:
        return self.ctx.keys

    @property
    def fault_hook(self) -> FaultHook | None:
        return self.ctx.fault_hook

    @fault_hook.setter
    def fault_hook(self, hook: FaultHook | None) -> None:
        self.ctx.fault_hook = hook

    @property
    def hears_clients(self) -> bool:
        return self.ctx.hears_clients

    @hears_clients.setter
    def hears_clients(self, value: bool) -> None:
        self.ctx.hears_clients = value

    @property
    def eviction_metrics(self) -> EvictionMetrics:
        return self.ctx.metrics

    @property
    def evictor_lease(self) -> EvictorLease:
        return self.eviction.lease

    def prefix_of(self, key: str) -> str:
        return self.ctx.prefix_of(key)

    def shard_of_key(self, key: str) -> int:
        return self.ctx.shard_of_key(key)

    async def check_meta(self) -> None:
        await self.namespace.check()

    async def run_sharded(
        self, script: str, items: Sequence[ShardItem], head: Sequence[Any] = ()
    ) -> list[tuple[list[int], Any]]:
        return await self.ctx.run_sharded(script, items, head)

    async def shard_totals(self, *fields: str) -> dict[str, int]:
        return await self.ctx.shard_totals(*fields)

    # -- segments and clients ------------------------------------------------------------------
    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        await self.segments.mount_segment(segment, client_id)

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        await self.segments.remount_segment(segments, client_id)

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        await self.segments.unmount_segment(segment_id, client_id)

    async def ping(self, client_id: str) -> PingResponse:
        return await self.segments.ping(client_id)

    async def segment_stats(self, segment_ids: Sequence[str] | None = None) -> list[SegmentStats]:
        return await self.segments.segment_stats(segment_ids)

    async def usage(self) -> Usage:
        return await self.segments.usage()

    async def used_ratio(self) -> float:
        return await self.segments.used_ratio()

    # -- puts ----------------------------------------------------------------------------------
    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        return await self.puts.put_start(client_id, key, slice_lengths, config)

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        return await self.puts.batch_put_start(client_id, keys, slice_lengths, config)

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.puts.put_end(client_id, key, replica_type)

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.puts.batch_put_end(client_id, keys, replica_type)

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        await self.puts.put_revoke(client_id, key, replica_type)

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        return await self.puts.batch_put_revoke(client_id, keys, replica_type)

    # -- objects -------------------------------------------------------------------------------
    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        return await self.objects.get_replica_list(key)

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        return await self.objects.batch_get_replica_list(keys)

    async def get_replica_list_by_regex(self, pattern: str) -> dict[str, GetReplicaListResponse]:
        return await self.objects.get_replica_list_by_regex(pattern)

    async def exist_key(self, key: str) -> bool:
        return await self.objects.exist_key(key)

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        return await self.objects.batch_exist_key(keys)

    async def remove(self, key: str, force: bool = False) -> None:
        await self.objects.remove(key, force)

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        return await self.objects.batch_remove(keys, force)

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        return await self.objects.remove_by_regex(pattern, force)

    async def remove_all(self, force: bool = False) -> int:
        return await self.objects.remove_all(force)

    async def complete_objects(self) -> dict[str, str]:
        return await self.objects.complete_objects()

    async def complete_keys(self) -> set[str]:
        return await self.objects.complete_keys()

    # -- the radix index -----------------------------------------------------------------------
    async def register_radix_tree_node(
        self, prefix_hash: str, parent_prefix_hash: str, keys: Sequence[str]
    ) -> None:
        await self.radix.register_radix_tree_node(prefix_hash, parent_prefix_hash, keys)

    async def batch_register_radix_tree_node(
        self, items: Sequence[RegisterItem | tuple[str, str, Sequence[str]] | dict[str, Any]]
    ) -> list[MooncakeError | None]:
        return await self.radix.batch_register_radix_tree_node(items)

    async def get_keys_by_prefix(self, prefix_hash: str) -> RadixNode:
        return await self.radix.get_keys_by_prefix(prefix_hash)

    async def get_subtree_keys(self, prefix_hash: str, max_depth: int = 16) -> SubtreeResult:
        return await self.radix.get_subtree_keys(prefix_hash, max_depth)

    async def unregister_radix_tree_keys(self, keys: Iterable[str]) -> int:
        return await self.radix.unregister_radix_tree_keys(keys)

    async def get_nodes(self, hashes: Sequence[str]) -> list[RadixNode | None]:
        return await self.radix.get_nodes(hashes)

    async def finish_unlinks(self, conts: Sequence[Sequence[Any]]) -> int:
        return await self.radix.finish_unlinks(conts)

    # -- the janitor and eviction --------------------------------------------------------------
    async def heartbeat(self, hearing: bool | None = None, janitor_turn: bool = False) -> bool:
        return await self.janitor.heartbeat(hearing, janitor_turn)

    async def run_janitor_once(
        self, force: bool = False, hearing: bool | None = None
    ) -> JanitorReport:
        return await self.janitor.run_janitor_once(force, hearing)

    async def drain_outboxes(self) -> int:
        return await self.janitor.drain_outboxes()

    async def resume_unlinks(self) -> int:
        return await self.eviction.resume_unlinks()

    async def evict_once(
        self,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        wait: bool = True,
    ) -> EvictionResult:
        return await self.eviction.evict_once(
            force=force, max_objects=max_objects, target_ratio=target_ratio, wait=wait
        )

    def eviction_coordinator(
        self, *, check_interval_ms: int = 20, janitor: bool = True
    ) -> EvictionCoordinator:
        return self.eviction.coordinator(check_interval_ms=check_interval_ms, janitor=janitor)
