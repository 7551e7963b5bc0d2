"""The coro_rpc listener and the front end, in process: raw frames against a WireServer over a
MasterService (fakeredis unless a test needs a real server), every RPC mapping, errors,
pipelining, backpressure, malformed frames, graceful shutdown."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.errors import ErrorCode
from mooncake_redis.wire.frontend import WireFrontend
from mooncake_redis.wire.ids import uuid_of, uuid_str
from mooncake_redis.wire.protocol import REQ_HEADER, Errc
from mooncake_redis.wire.rpc_table import RPCS, function_id
from mooncake_redis.wire.server import WireServer
from mooncake_redis.wire.structpack import Err
from mooncake_redis.wire.types import (
    UUID,
    MemoryDescriptor,
    ObjectMeta,
    ReplicateConfig,
    Segment,
)
from tests.wire_helpers import RawClient

CLIENT = UUID(0x1111, 0x2222)
SEG = Segment(UUID(7, 9), "127.0.0.1:18399", 1 << 40, 1 << 24, "127.0.0.1:18399", "tcp", "")
D = "default"
MEMORY, ALL = 0, 4


def fid(name: str) -> int:
    return function_id(name)


def _body(name: str, args: Any) -> bytes:
    codec = RPCS[name].request
    assert codec is not None
    return codec.encode(args)


def _rsp(name: str) -> Any:
    return RPCS[name].response


async def start(svc: MasterService, **kw: Any) -> WireServer:
    server = WireServer(WireFrontend(svc, kw.pop("parents", None)), "127.0.0.1", 0, **kw)
    await server.start()
    return server


@pytest.fixture
async def fake_service() -> AsyncIterator[MasterService]:
    import uuid

    svc = await MasterService.from_url(
        f"fakeredis://{uuid.uuid4().hex}", Config(enable_radix_tree=True, num_shards=8)
    )
    yield svc
    await svc.aclose()


@pytest.fixture
async def wire(fake_service: MasterService) -> AsyncIterator[tuple[WireServer, RawClient]]:
    server = await start(fake_service)
    client = await RawClient.connect(server.port)
    assert await client.call("MountSegment", (SEG, CLIENT)) is None
    yield server, client
    await client.close()
    await server.stop(1)


async def put(c: RawClient, key: str, size: int = 4096) -> Any:
    r = await c.call("PutStart", (CLIENT, key, size, ReplicateConfig(), D))
    if isinstance(r, Err):
        return r
    assert await c.call("PutEnd", (CLIENT, ObjectMeta(key), ALL, D)) is None
    return r


async def test_setup_calls_as_the_client_sends_them(wire: Any) -> None:
    _, c = wire
    assert await c.call("ServiceReady") == "2.0.0"
    cfg = await c.call("GetStorageConfig")
    assert (cfg.fsdir, cfg.enable_disk_eviction, cfg.quota_bytes) == ("", True, 0)
    assert await c.call("GetFsdir") == ""
    ping = await c.call("Ping", CLIENT)
    assert ping.client_status == 1  # OK: mounted just now
    assert await c.call("Ping", UUID(5, 5)) == (ping.view_version_id, 2)  # unknown: NEED_REMOUNT
    assert await c.call("ReMountSegment", ([SEG], CLIENT)) is None
    assert await c.call("FetchTasks", (CLIENT, 16)) == []


async def test_put_get_exist_remove(wire: Any) -> None:
    _, c = wire
    [desc] = await put(c, "key-A")
    assert desc.status == 2  # PROCESSING, as PutStart answers
    buf = desc.descriptor_variant.buffer_descriptor
    assert isinstance(desc.descriptor_variant, MemoryDescriptor)
    assert SEG.base <= buf.buffer_address < SEG.base + SEG.size and buf.size == 4096
    assert (buf.protocol, buf.transport_endpoint) == ("tcp", SEG.te_endpoint)
    assert await c.call("ExistKey", ("key-A", D)) is True
    assert await c.call("ExistKey", ("nope", D)) is False
    got = await c.call("GetReplicaList", ("key-A", D))
    assert [r.id for r in got.replicas] == [desc.id] and got.replicas[0].status == 3
    assert got.replicas[0].descriptor_variant == desc.descriptor_variant
    assert got.lease_ttl_ms == 5000 and got.object_checksum is None
    assert await c.call("GetReplicaList", ("nope", D)) == Err(ErrorCode.OBJECT_NOT_FOUND)
    assert await c.call("Remove", ("key-A", False, D)) == Err(ErrorCode.OBJECT_HAS_LEASE)
    assert await c.call("Remove", ("key-A", True, D)) is None
    assert await c.call("ExistKey", ("key-A", D)) is False
    assert await put(c, "key-A") != Err(ErrorCode.OBJECT_ALREADY_EXISTS)  # gone: put again
    assert await c.call("PutStart", (CLIENT, "key-A", 8, ReplicateConfig(), D)) == Err(
        ErrorCode.OBJECT_ALREADY_EXISTS
    )


async def test_batches_with_absent_keys(wire: Any) -> None:
    _, c = wire
    keys = [f"b{i}" for i in range(5)]
    res = await c.call("BatchPutStart", (CLIENT, keys, [100] * 5, ReplicateConfig(), D))
    assert all(isinstance(r, list) and len(r) == 1 for r in res)
    ends = await c.call("BatchPutEnd", (CLIENT, [ObjectMeta(k) for k in keys[:4]], ALL, D))
    assert ends == [None] * 4
    assert await c.call("BatchPutRevoke", (CLIENT, ["b4", "zz"], MEMORY, D)) == [
        None,
        Err(ErrorCode.OBJECT_NOT_FOUND),
    ]
    assert await c.call("BatchExistKey", ([*keys, "zz"], D)) == [True] * 4 + [False, False]
    lists = await c.call("BatchGetReplicaList", (["b0", "zz"], D))
    assert len(lists[0].replicas) == 1 and lists[1] == Err(ErrorCode.OBJECT_NOT_FOUND)
    assert await c.call("BatchRemove", (["b1", "zz"], True, D)) == [
        None,
        Err(ErrorCode.OBJECT_NOT_FOUND),
    ]
    regex = await c.call("GetReplicaListByRegex", ("^b[02]$", D))
    assert sorted(regex) == ["b0", "b2"] and all(len(v) == 1 for v in regex.values())
    assert await c.call("GetReplicaListByRegex", ("(", D)) == Err(ErrorCode.INVALID_PARAMS)
    assert await c.call("RemoveByRegex", ("^b[02]$", True, D)) == 2
    assert await c.call("RemoveAll", (True, D)) == 1  # b3
    assert await c.call("BatchExistKey", (keys, D)) == [False] * 5


async def test_300_key_batch_and_a_long_key(wire: Any) -> None:
    _, c = wire
    keys = [f"k{i:03}" for i in range(300)]
    res = await c.call("BatchPutStart", (CLIENT, keys, [64] * 300, ReplicateConfig(), D))
    assert len(res) == 300 and not any(isinstance(r, Err) for r in res)
    await c.call("BatchPutEnd", (CLIENT, [ObjectMeta(k) for k in keys], ALL, D))
    assert await c.call("BatchExistKey", (keys, D)) == [True] * 300
    long = "L" * 300
    assert not isinstance(await put(c, long, 100), Err)
    assert len((await c.call("GetReplicaList", (long, D))).replicas) == 1


async def test_mooncake_errors_pass_through(wire: Any) -> None:
    _, c = wire
    big = await c.call("PutStart", (CLIENT, "huge", SEG.size + 1, ReplicateConfig(), D))
    assert big == Err(ErrorCode.INVALID_PARAMS)  # larger than every segment (docs/store.md)
    assert await c.call("PutStart", (CLIENT, "z", 0, ReplicateConfig(), D)) == Err(
        ErrorCode.INVALID_PARAMS
    )
    assert await c.call("PutEnd", (CLIENT, ObjectMeta("nope"), ALL, D)) == Err(
        ErrorCode.OBJECT_NOT_FOUND
    )
    await c.call("PutStart", (CLIENT, "mine", 8, ReplicateConfig(), D))
    assert await c.call("PutEnd", (UUID(3, 3), ObjectMeta("mine"), ALL, D)) == Err(
        ErrorCode.ILLEGAL_CLIENT
    )
    assert await c.call("PutEnd", (CLIENT, ObjectMeta("mine"), 1, D)) == Err(
        ErrorCode.INVALID_PARAMS  # a DISK replica: memory only
    )
    assert await c.call("ExistKey", ("", D)) == Err(ErrorCode.INVALID_PARAMS)


async def test_unknown_functions_and_bad_arguments_are_coro_rpc_errors(wire: Any) -> None:
    _, c = wire
    for f in (0x12345678, fid("CalcCacheStats"), fid("CopyStart")):
        err, _ = await c.send(f)
        assert err == Errc.function_not_registered
    assert await c.call("ServiceReady") == "2.0.0"  # the connection is still good
    err, _ = await c.send(fid("ExistKey"), b"\x01\x02\x03\x04\x05")  # wrong hash
    assert err == Errc.invalid_rpc_arguments
    good = _body("ExistKey", ("key", D))
    err, _ = await c.send(fid("ExistKey"), good[:-2])  # truncated payload
    assert err == Errc.invalid_rpc_arguments
    assert await c.call("ServiceReady") == "2.0.0"


async def test_bad_magic_drops_the_connection(wire: Any) -> None:
    server, _ = wire
    c = await RawClient.connect(server.port)
    c.writer.write(REQ_HEADER.pack(0x16, 0, 0, 0, 1, fid("ServiceReady"), 0, 0))
    await asyncio.wait_for(c.closed.wait(), 5)
    c = await RawClient.connect(server.port)
    c.writer.write(REQ_HEADER.pack(0x15, 1, 0, 0, 1, fid("ServiceReady"), 0, 0))  # version 1
    await asyncio.wait_for(c.closed.wait(), 5)
    assert server.metrics.dropped._value.get() == 2


async def test_oversized_frame_is_refused_before_it_is_read(fake_service: MasterService) -> None:
    server = await start(fake_service, max_frame_bytes=1024)
    try:
        c = await RawClient.connect(server.port)
        fut = c.send(fid("ExistKey"))
        c.writer.write(REQ_HEADER.pack(0x15, 0, 0, 0, 99, fid("ExistKey"), 1 << 31, 0))
        err, _ = await asyncio.wait_for(fut, 5)  # the first request is still answered
        assert err == 0 or err == Errc.invalid_rpc_arguments
        await asyncio.wait_for(c.closed.wait(), 5)
        assert 99 in c.order  # message_too_large for seq 99, then the close
    finally:
        await server.stop(1)


async def test_pipelined_requests_and_split_frames(wire: Any) -> None:
    _, c = wire
    await put(c, "p")
    futs = [c.send_rpc("ExistKey", ("p" if i % 2 else "q", D)) for i in range(100)]
    replies = await asyncio.gather(*futs)
    codec = _rsp("ExistKey")
    assert [codec.decode(b) for _, b in replies] == [bool(i % 2) for i in range(100)]
    # One frame written a byte at a time.
    frame = REQ_HEADER.pack(0x15, 0, 0, 0, 500, fid("ExistKey"), 0, 0)
    body = _body("ExistKey", ("p", D))
    frame = frame[:12] + struct.pack("<I", len(body)) + frame[16:] + body
    c.replies[500] = asyncio.get_running_loop().create_future()
    for i in range(len(frame)):
        c.writer.write(frame[i : i + 1])
        await c.writer.drain()
    err, b = await asyncio.wait_for(c.replies[500], 5)
    assert err == 0 and codec.decode(b) is True


async def test_replies_go_out_in_completion_order(wire: Any) -> None:
    server, c = wire
    gate = asyncio.Event()
    fe = server.frontend
    original = fe.handlers["ExistKey"]

    async def slow(args: Any) -> Any:
        if args[0] == "slow":
            await gate.wait()
        return await original(args)

    fe.handlers["ExistKey"] = slow
    first = c.send_rpc("ExistKey", ("slow", D))
    second = c.send_rpc("ExistKey", ("fast", D))
    await asyncio.wait_for(second, 5)
    assert not first.done()
    gate.set()
    await asyncio.wait_for(first, 5)
    assert c.order[-2:] == [c.seq, c.seq - 1]  # the later request was answered first


async def test_in_flight_requests_are_bounded_per_connection(fake_service: MasterService) -> None:
    server = await start(fake_service, max_in_flight=3)
    gate = asyncio.Event()
    running = 0
    peak = 0

    async def held(args: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await gate.wait()
        running -= 1
        return False

    server.frontend.handlers["ExistKey"] = held
    c = await RawClient.connect(server.port)
    try:
        futs = [c.send_rpc("ExistKey", (f"k{i}", D)) for i in range(20)]
        await asyncio.sleep(0.3)
        assert running == 3  # the connection stopped reading at the bound
        gate.set()
        await asyncio.wait_for(asyncio.gather(*futs), 10)
        assert peak == 3
    finally:
        await c.close()
        await server.stop(1)


async def test_graceful_stop_finishes_requests_in_flight(fake_service: MasterService) -> None:
    server = await start(fake_service)
    gate = asyncio.Event()

    async def held(args: Any) -> Any:
        await gate.wait()
        return True

    server.frontend.handlers["ExistKey"] = held
    c = await RawClient.connect(server.port)
    fut = c.send_rpc("ExistKey", ("k", D))
    await asyncio.sleep(0.1)
    stopping = asyncio.get_running_loop().create_task(server.stop(5))
    await asyncio.sleep(0.1)
    with pytest.raises(OSError):  # no longer accepting
        await RawClient.connect(server.port)
    gate.set()
    err, body = await asyncio.wait_for(fut, 5)
    assert err == 0 and _rsp("ExistKey").decode(body) is True
    await asyncio.wait_for(stopping, 5)
    await asyncio.wait_for(c.closed.wait(), 5)


async def test_workers_share_a_port(fake_service: MasterService) -> None:
    a = await start(fake_service)
    b = WireServer(WireFrontend(fake_service), "127.0.0.1", a.port)
    await b.start()  # SO_REUSEPORT: a second listener on the same port
    try:
        clients = [await RawClient.connect(a.port) for _ in range(16)]
        assert all([await c.call("ServiceReady") == "2.0.0" for c in clients])
        assert len(a.connections) + len(b.connections) == 16
        for c in clients:
            await c.close()
    finally:
        await a.stop(1)
        await b.stop(1)


def test_uuid_mapping_is_reversible() -> None:
    u = UUID(0x0123456789ABCDEF, 0xFEDCBA9876543210)
    assert uuid_str(u) == "01234567-89ab-cdef-fedc-ba9876543210"
    assert uuid_of(uuid_str(u)) == u
    assert uuid_of(uuid_str(UUID(0, 0))) == UUID(0, 0)
    top = (1 << 64) - 1
    assert uuid_of(uuid_str(UUID(top, top))) == UUID(top, top)


async def test_segment_and_client_ids_in_the_store(wire: Any) -> None:
    server, c = wire
    svc = server.frontend.svc
    [stats] = await svc.segment_stats()
    assert stats.id == uuid_str(SEG.id) and stats.client_id == uuid_str(CLIENT)
    assert stats.name == SEG.name
    # Preferred segments are named as Mooncake names them; the front end maps names to ids.
    seg2 = Segment(UUID(8, 8), "127.0.0.1:18398", 1 << 41, 1 << 24, "127.0.0.1:18398", "tcp", "")
    await c.call("MountSegment", (seg2, CLIENT))
    cfg = ReplicateConfig(preferred_segment="127.0.0.1:18398")
    for i in range(6):
        [d] = await c.call("PutStart", (CLIENT, f"pref{i}", 8, cfg, D))
        assert d.descriptor_variant.buffer_descriptor.transport_endpoint == "127.0.0.1:18398"
    assert await c.call("UnmountSegment", (seg2.id, CLIENT)) is None
    assert len(await svc.segment_stats()) == 1
