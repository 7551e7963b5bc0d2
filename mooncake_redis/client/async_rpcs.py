"""AsyncMasterClient's methods, one per RPC. GENERATED from the RPC table and MasterService's
signatures by ``python -m mooncake_redis.client.generate``: do not edit by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import MooncakeError
from ..server.schemas import RPCS
from ..types import (
    ConfigArg,
    EvictionResult,
    GetReplicaListResponse,
    PingResponse,
    RadixNode,
    RegisterItem,
    ReplicaDescriptor,
    Segment,
    SubtreeResult,
)
from .base import AsyncClient

__all__ = ["AsyncMasterClient"]


class AsyncMasterClient(AsyncClient):
    """Async client: ``async with AsyncMasterClient("http://127.0.0.1:50051") as c: ...``.

    ``url`` may list several workers (a sequence or comma-separated); a connection failure moves
    to the next one. ``transport`` is for tests (e.g. ``httpx.ASGITransport(app)``).
    """

    async def mount_segment(self, segment: Segment | Mapping[str, Any], client_id: str) -> None:
        """MountSegment: register a client's buffer (idempotent)."""
        await self._call(RPCS["mount_segment"], {"segment": segment, "client_id": client_id})

    async def remount_segment(
        self, segments: Sequence[Segment | Mapping[str, Any]], client_id: str
    ) -> None:
        """ReMountSegment: mount several segments again after NEED_REMOUNT."""
        await self._call(RPCS["remount_segment"], {"segments": segments, "client_id": client_id})

    async def unmount_segment(self, segment_id: str, client_id: str = "") -> None:
        """UnmountSegment: drop a segment and every replica on it (unknown = OK)."""
        await self._call(
            RPCS["unmount_segment"], {"segment_id": segment_id, "client_id": client_id}
        )

    async def ping(self, client_id: str) -> PingResponse:
        """Ping: client heartbeat -> view version and client status."""
        result: PingResponse = await self._call(RPCS["ping"], {"client_id": client_id})
        return result

    async def put_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        """PutStart: allocate replicas for a new object."""
        result: list[ReplicaDescriptor] = await self._call(
            RPCS["put_start"],
            {"client_id": client_id, "key": key, "slice_lengths": slice_lengths, "config": config},
        )
        return result

    async def put_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        """PutEnd: mark the object's replicas COMPLETE."""
        await self._call(
            RPCS["put_end"], {"client_id": client_id, "key": key, "replica_type": replica_type}
        )

    async def put_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        """PutRevoke: drop a put's PROCESSING replicas."""
        await self._call(
            RPCS["put_revoke"], {"client_id": client_id, "key": key, "replica_type": replica_type}
        )

    async def batch_put_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        """BatchPutStart: one result per key."""
        result: list[list[ReplicaDescriptor] | MooncakeError] = await self._call(
            RPCS["batch_put_start"],
            {
                "client_id": client_id,
                "keys": keys,
                "slice_lengths": slice_lengths,
                "config": config,
            },
        )
        return result

    async def batch_put_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        """BatchPutEnd: one result per key."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_put_end"],
            {"client_id": client_id, "keys": keys, "replica_type": replica_type},
        )
        return result

    async def batch_put_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        """BatchPutRevoke: one result per key."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_put_revoke"],
            {"client_id": client_id, "keys": keys, "replica_type": replica_type},
        )
        return result

    async def upsert_start(
        self, client_id: str, key: str, slice_lengths: Sequence[int] | int, config: ConfigArg = None
    ) -> list[ReplicaDescriptor]:
        """UpsertStart: a put, or new data for an existing key."""
        result: list[ReplicaDescriptor] = await self._call(
            RPCS["upsert_start"],
            {"client_id": client_id, "key": key, "slice_lengths": slice_lengths, "config": config},
        )
        return result

    async def upsert_end(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        """UpsertEnd: as PutEnd."""
        await self._call(
            RPCS["upsert_end"], {"client_id": client_id, "key": key, "replica_type": replica_type}
        )

    async def upsert_revoke(self, client_id: str, key: str, replica_type: str = "MEMORY") -> None:
        """UpsertRevoke: as PutRevoke (the object goes)."""
        await self._call(
            RPCS["upsert_revoke"],
            {"client_id": client_id, "key": key, "replica_type": replica_type},
        )

    async def batch_upsert_start(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg] = None,
    ) -> list[list[ReplicaDescriptor] | MooncakeError]:
        """BatchUpsertStart: one result per key."""
        result: list[list[ReplicaDescriptor] | MooncakeError] = await self._call(
            RPCS["batch_upsert_start"],
            {
                "client_id": client_id,
                "keys": keys,
                "slice_lengths": slice_lengths,
                "config": config,
            },
        )
        return result

    async def batch_upsert_end(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        """BatchUpsertEnd: one result per key."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_upsert_end"],
            {"client_id": client_id, "keys": keys, "replica_type": replica_type},
        )
        return result

    async def batch_upsert_revoke(
        self, client_id: str, keys: Sequence[str], replica_type: str = "MEMORY"
    ) -> list[MooncakeError | None]:
        """BatchUpsertRevoke: one result per key."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_upsert_revoke"],
            {"client_id": client_id, "keys": keys, "replica_type": replica_type},
        )
        return result

    async def get_replica_list(self, key: str) -> GetReplicaListResponse:
        """GetReplicaList: COMPLETE replicas of a key; grants a lease."""
        result: GetReplicaListResponse = await self._call(RPCS["get_replica_list"], {"key": key})
        return result

    async def batch_get_replica_list(
        self, keys: Sequence[str]
    ) -> list[GetReplicaListResponse | MooncakeError]:
        """BatchGetReplicaList: one result per key."""
        result: list[GetReplicaListResponse | MooncakeError] = await self._call(
            RPCS["batch_get_replica_list"], {"keys": keys}
        )
        return result

    async def exist_key(self, key: str) -> bool:
        """ExistKey: true only with a COMPLETE replica; a hit grants a lease."""
        result: bool = await self._call(RPCS["exist_key"], {"key": key})
        return result

    async def batch_exist_key(self, keys: Sequence[str]) -> list[bool | MooncakeError]:
        """BatchExistKey: one result per key."""
        result: list[bool | MooncakeError] = await self._call(
            RPCS["batch_exist_key"], {"keys": keys}
        )
        return result

    async def remove(self, key: str, force: bool = False) -> None:
        """Remove: erase an object (OBJECT_HAS_LEASE unless force)."""
        await self._call(RPCS["remove"], {"key": key, "force": force})

    async def remove_by_regex(self, pattern: str, force: bool = False) -> int:
        """RemoveByRegex: erase matching objects, skipping leased ones -> count."""
        result: int = await self._call(
            RPCS["remove_by_regex"], {"pattern": pattern, "force": force}
        )
        return result

    async def remove_all(self, force: bool = False) -> int:
        """RemoveAll: erase every object, skipping leased ones -> count."""
        result: int = await self._call(RPCS["remove_all"], {"force": force})
        return result

    async def batch_remove(
        self, keys: Sequence[str], force: bool = False
    ) -> list[MooncakeError | None]:
        """BatchRemove: one result per key."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_remove"], {"keys": keys, "force": force}
        )
        return result

    async def register_radix_tree_node(
        self, prefix_hash: str, parent_prefix_hash: str, keys: Sequence[str]
    ) -> None:
        """RegisterRadixTreeNode: register keys under a prefix node (RFC Path B)."""
        await self._call(
            RPCS["register_radix_tree_node"],
            {"prefix_hash": prefix_hash, "parent_prefix_hash": parent_prefix_hash, "keys": keys},
        )

    async def batch_register_radix_tree_node(
        self, items: Sequence[RegisterItem | tuple[str, str, Sequence[str]] | dict[str, Any]]
    ) -> list[MooncakeError | None]:
        """BatchRegisterRadixTreeNode: one result per item."""
        result: list[MooncakeError | None] = await self._call(
            RPCS["batch_register_radix_tree_node"], {"items": items}
        )
        return result

    async def get_keys_by_prefix(self, prefix_hash: str) -> RadixNode:
        """GetKeysByPrefix: a node, its keys and children."""
        result: RadixNode = await self._call(
            RPCS["get_keys_by_prefix"], {"prefix_hash": prefix_hash}
        )
        return result

    async def get_subtree_keys(self, prefix_hash: str, max_depth: int = 16) -> SubtreeResult:
        """Every node and key under a node, down to max_depth."""
        result: SubtreeResult = await self._call(
            RPCS["get_subtree_keys"], {"prefix_hash": prefix_hash, "max_depth": max_depth}
        )
        return result

    async def unregister_radix_tree_keys(self, keys: Iterable[str]) -> int:
        """Remove keys from the index; empty nodes and shells cascade away -> count."""
        result: int = await self._call(RPCS["unregister_radix_tree_keys"], {"keys": keys})
        return result

    async def evict_once(
        self,
        *,
        force: bool = False,
        max_objects: int | None = None,
        target_ratio: float | None = None,
        wait: bool = True,
    ) -> EvictionResult:
        """One eviction pass now (takes the evictor lease)."""
        result: EvictionResult = await self._call(
            RPCS["evict_once"],
            {
                "force": force,
                "max_objects": max_objects,
                "target_ratio": target_ratio,
                "wait": wait,
            },
        )
        return result
