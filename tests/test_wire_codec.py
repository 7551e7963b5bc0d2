"""The struct_pack codec and coro_rpc framing against measured facts (tests/data/wire: frames the
real client and master exchanged, the literal and hash of every (direction, RPC) seen, the
function ids), plus round trips and malformed input. Pure Python: no server."""

from __future__ import annotations

import contextlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mooncake_redis.wire.codec import Codec
from mooncake_redis.wire.declare import STRING_T, wire_type
from mooncake_redis.wire.protocol import (
    Errc,
    error_response,
    parse_request_header,
    parse_response_header,
)
from mooncake_redis.wire.rpc_table import BY_FID, NAME_OF_FID, REGISTERED, RPCS, function_id
from mooncake_redis.wire.structpack import (
    Bool,
    Err,
    Expected,
    Int,
    Map,
    Monostate,
    Optional,
    String,
    Struct,
    Variant,
    Vector,
    WireError,
    WireType,
)
from mooncake_redis.wire.types import (
    UUID,
    BufferDescriptor,
    GetReplicaListResponse,
    MemoryDescriptor,
    ReplicaDescriptor,
    ReplicateConfig,
    Segment,
)

DATA = Path(__file__).parent / "data" / "wire"


def frames(name: str) -> list[tuple[str, str, bytes]]:
    """(direction, RPC name, body) of every frame of a capture, split as coro_rpc frames them."""
    bufs: dict[tuple[int, str], bytes] = {}
    pending: dict[tuple[int, int], str] = {}
    out: list[tuple[str, str, bytes]] = []
    for line in (DATA / name).read_text().splitlines():
        rec = json.loads(line)
        if "hex" not in rec:
            continue
        k = (rec["c"], rec["d"])
        b = bufs.get(k, b"") + bytes.fromhex(rec["hex"])
        while True:
            if rec["d"] == "c2s":
                if len(b) < 20:
                    break
                h = parse_request_header(b)
                if len(b) < 20 + h.length:
                    break
                rpc = NAME_OF_FID[h.function_id]
                pending[(rec["c"], h.seq_num)] = rpc
                out.append(("REQ", rpc, b[20 : 20 + h.length]))
                b = b[20 + h.length :]
            else:
                if len(b) < 16:
                    break
                r = parse_response_header(b)
                if len(b) < 16 + r.length:
                    break
                assert r.err_code == 0
                out.append(("RSP", pending[(rec["c"], r.seq_num)], b[16 : 16 + r.length]))
                b = b[16 + r.length :]
        bufs[k] = b
    return out


CAPTURED = [f for name in ("real_master.jsonl", "real_master_batch.jsonl") for f in frames(name)]


def codec_of(direction: str, rpc: str) -> Codec | None:
    r = RPCS[rpc]
    return r.request if direction == "REQ" else r.response


def test_captures_are_all_there() -> None:
    assert len(CAPTURED) == 132  # 84 + 48 frames, four of them empty-bodied requests
    assert {rpc for _, rpc, _ in CAPTURED} <= set(RPCS)


@pytest.mark.parametrize("i", range(len(CAPTURED)))
def test_captured_frame_decodes_and_reencodes_byte_for_byte(i: int) -> None:
    direction, rpc, body = CAPTURED[i]
    codec = codec_of(direction, rpc)
    if codec is None:
        assert body == b""  # no arguments: empty body
        return
    value = codec.decode(body)
    assert codec.encode(value) == body
    # The same value without the literal (a release build's frame) decodes the same.
    bare = codec.encode(value, literal=False)
    assert len(bare) < len(body) and codec.decode(bare) == value


def test_captured_values_read_as_mooncake_types() -> None:
    put = next(b for d, r, b in CAPTURED if (d, r) == ("RSP", "PutStart"))
    [desc] = RPCS["PutStart"].response.decode(put)
    assert isinstance(desc, ReplicaDescriptor) and desc.status == 2  # PROCESSING
    mem = desc.descriptor_variant
    assert isinstance(mem, MemoryDescriptor)
    assert mem.buffer_descriptor.size == 4096 and mem.buffer_descriptor.protocol == "tcp"
    mount = next(b for d, r, b in CAPTURED if (d, r) == ("REQ", "MountSegment"))
    seg, client = RPCS["MountSegment"].request.decode(mount)  # type: ignore[union-attr]
    assert isinstance(seg, Segment) and isinstance(seg.id, UUID) and isinstance(client, UUID)
    assert seg.size == 64 << 20 and seg.name == seg.te_endpoint
    start = next(b for d, r, b in CAPTURED if (d, r) == ("REQ", "BatchPutStart"))
    _, keys, sizes, cfg, tenant = RPCS["BatchPutStart"].request.decode(start)  # type: ignore[union-attr]
    assert keys == ["b0", "b1", "b2"] and sizes == [1000, 2000, 3000] and tenant == "default"
    assert cfg == ReplicateConfig()  # the client's defaults are the declaration's defaults


def type_table() -> list[tuple[str, str, int, str]]:
    rows = []
    for line in (DATA / "type_table_check.txt").read_text().splitlines():
        m = re.match(r"\s+(\w+)\s+(REQ|RSP)\s+hash=0x([0-9a-f]+)\s+literal=([0-9a-f]+)", line)
        if m:
            rows.append((m[1], m[2], int(m[3], 16), m[4]))
    return rows


def test_every_literal_and_hash_seen_on_the_wire_is_what_the_declarations_compute() -> None:
    rows = type_table()
    assert len(rows) == 38  # 40 pairs minus the two argument-less requests
    for rpc, direction, wire_hash, literal in rows:
        codec = codec_of(direction, rpc)
        assert codec is not None, (rpc, direction)
        assert codec.literal.hex() == literal, (rpc, direction)
        assert codec.types_code | 1 == wire_hash, (rpc, direction)  # | 1: "metainfo follows"


def test_function_ids_are_computed_from_names() -> None:
    table = {}
    for line in (DATA / "fid_table.txt").read_text().splitlines()[1:]:
        fid, b0, b1, b2, b3, name = line.split()[:6]
        table[name] = int(fid, 16)
        assert bytes.fromhex(b0 + b1 + b2 + b3) == struct.pack("<I", int(fid, 16))
    assert len(table) == len(REGISTERED) == 64
    for name in REGISTERED:
        assert function_id(name) == table[name], name
    assert function_id("Ping") == 0xD6C2DAE5  # the README's worked example
    assert set(BY_FID) <= set(table.values())


def test_widths_follow_the_largest_container() -> None:
    codec = RPCS["ExistKey"].request
    assert codec is not None
    for n, meta in ((255, 0x04), (256, 0x0C), (65_535, 0x0C), (65_536, 0x14)):
        body = codec.encode(("k" * n, "default"))
        assert body[4] == meta
        assert codec.decode(body) == ("k" * n, "default")
    # A 300-byte key widens every length in the message (captured: metainfo 0c, length 2c 01).
    long = codec.encode(("L" * 300, "default"))
    assert long[5 + len(codec.literal) + 1 :][:2] == b"\x2c\x01"
    # Without a literal and with 1-byte lengths there is no metainfo byte at all.
    short = codec.encode(("k", "default"), literal=False)
    assert struct.unpack_from("<I", short)[0] == codec.types_code and short[4] == 1
    # 8-byte lengths (metainfo 0b11000) decode too.
    wide = struct.pack("<IB", codec.types_code | 1, 0x18) + struct.pack("<Q", 2) + b"ab"
    wide += struct.pack("<Q", 7) + b"default"
    assert codec.decode(wide) == ("ab", "default")


def test_a_batch_of_300_keys_and_an_empty_batch() -> None:
    codec = RPCS["BatchExistKey"].request
    assert codec is not None
    keys = [f"key-{i}" for i in range(300)]
    assert codec.decode(codec.encode((keys, "default"))) == (keys, "default")
    assert codec.decode(codec.encode(([], "default"))) == ([], "default")


def test_error_body_matches_the_real_server() -> None:
    # Measured from the real master for an unknown function id and for undecodable arguments.
    assert error_response(1, Errc.function_not_registered)[16:].hex() == (
        "77facf9d04800c001f746865207270632066756e6374696f6e206e6f742072656769737465726564"
    )
    assert error_response(5, Errc.invalid_rpc_arguments)[16:].hex() == (
        "77facf9d04800c000f696e76616c69642072706320617267"
    )
    assert Codec(STRING_T).decode(error_response(1, Errc.protocol_error)[16:]) == "protocol_error"


# --------------------------------------------------------------------------- round trips
def strategy(t: WireType, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of a wire type (bounded sizes, a few long strings to widen lengths)."""
    if isinstance(t, Int):
        bits = t.min_size * 8
        signed = t.fmt in ("b", "h", "i", "q")
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return st.integers(lo, hi)
    if isinstance(t, Bool):
        return st.booleans()
    if isinstance(t, Monostate):
        return st.none()
    if isinstance(t, String):
        text = st.text(max_size=12)
        return st.one_of(text, text, text, st.builds(lambda n: "x" * n, st.integers(250, 300)))
    if isinstance(t, Vector):
        return st.lists(strategy(t.item, depth + 1), max_size=4 if depth else 6)
    if isinstance(t, Map):
        return st.dictionaries(strategy(t.key, depth + 1), strategy(t.value, depth + 1), max_size=3)
    if isinstance(t, Optional):
        return st.none() | strategy(t.item, depth + 1)
    if isinstance(t, Expected):
        return st.builds(Err, st.integers(-(1 << 31), (1 << 31) - 1)) | strategy(t.value, depth)
    if isinstance(t, Variant):
        return st.one_of(*(strategy(sub, depth) for _, sub in t.alts))
    if isinstance(t, Struct):
        parts = [strategy(f, depth) for f in t.fields]
        if t.cls is tuple:
            return st.tuples(*parts)
        return st.tuples(*parts).map(lambda v, cls=t.cls: cls(*v))
    raise TypeError(t)


CODECS = [
    (f"{name} {kind}", codec)
    for name, rpc in RPCS.items()
    for kind, codec in (("REQ", rpc.request), ("RSP", rpc.response))
    if codec is not None
]


@pytest.mark.parametrize(("label", "codec"), CODECS, ids=[c[0] for c in CODECS])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(label: str, codec: Codec, data: st.DataObject) -> None:
    value = data.draw(strategy(codec.type))
    for literal in (True, False):
        body = codec.encode(value, literal)
        assert codec.decode(body) == value, label


# --------------------------------------------------------------------------- malformed input
SAMPLE_BODIES = [(d, r, b) for d, r, b in CAPTURED if b][:: max(1, len(CAPTURED) // 30)]


@pytest.mark.parametrize(("direction", "rpc", "body"), SAMPLE_BODIES)
def test_every_truncation_is_a_wire_error(direction: str, rpc: str, body: bytes) -> None:
    codec = codec_of(direction, rpc)
    assert codec is not None
    for n in range(len(body)):
        with pytest.raises(WireError):
            codec.decode(body[:n])


def test_wrong_hash_and_wrong_literal_are_wire_errors() -> None:
    codec = RPCS["ExistKey"].request
    assert codec is not None
    body = bytearray(codec.encode(("key-A", "default")))
    other = bytearray(body)
    other[1] ^= 0x40  # another type's hash
    with pytest.raises(WireError, match="type hash"):
        codec.decode(bytes(other))
    other = bytearray(body)
    other[6] ^= 0x01  # same hash, a literal that differs
    with pytest.raises(WireError, match="literal"):
        codec.decode(bytes(other))
    other = bytearray(body)
    other[4] |= 0b01  # "compatible" size field: never used by Mooncake types
    with pytest.raises(WireError):
        codec.decode(bytes(other))


def test_huge_lengths_fail_fast_without_allocating() -> None:
    codec = RPCS["BatchExistKey"].request
    assert codec is not None
    head = struct.pack("<IB", codec.types_code | 1, 0x18)  # 8-byte lengths, no literal
    for n in (1 << 62, (1 << 64) - 1, 10**12):
        with pytest.raises(WireError, match="past the end"):
            codec.decode(head + struct.pack("<Q", n) + b"\x01\x00")
    strings = RPCS["ExistKey"].request
    assert strings is not None
    head = struct.pack("<IB", strings.types_code | 1, 0x18)
    with pytest.raises(WireError, match="past the end"):
        strings.decode(head + struct.pack("<Q", 1 << 40) + b"abc")


def test_bad_flags_and_indexes_are_wire_errors() -> None:
    rsp = RPCS["GetReplicaList"].response
    reply = GetReplicaListResponse(
        [ReplicaDescriptor(1, MemoryDescriptor(BufferDescriptor(8, 64, "tcp", "h:1")), 3)], 10
    )
    good = rsp.encode(reply, literal=False)
    assert rsp.decode(good)
    for pos, value in ((4, 2), (6 + 8, 9)):  # expected flag 2; variant index 9
        bad = bytearray(good)
        bad[pos] = value
        with pytest.raises(WireError):
            rsp.decode(bytes(bad))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_raises_anything_but_wire_error(junk: bytes) -> None:
    for codec in (RPCS["PutStart"].request, RPCS["BatchPutStart"].request, RPCS["Ping"].request):
        assert codec is not None
        for body in (junk, struct.pack("<I", codec.types_code | 1) + junk):
            with contextlib.suppress(WireError):
                codec.decode(body)


def test_values_the_type_cannot_hold_are_value_errors() -> None:
    codec = RPCS["Ping"].request
    assert codec is not None
    with pytest.raises(ValueError):
        codec.encode(UUID(-1, 0))
    with pytest.raises(ValueError):
        codec.encode(UUID(1 << 64, 0))
    assert codec.decode(codec.encode(UUID((1 << 64) - 1, 0))) == UUID((1 << 64) - 1, 0)


def test_declarations_reject_what_struct_pack_cannot_say() -> None:
    with pytest.raises(TypeError):
        wire_type(int)  # an integer needs its width
    with pytest.raises(TypeError):
        wire_type(float)


_RESULTS = st.lists(st.one_of(st.booleans(), st.integers(-(2**31), 2**31 - 1).map(Err)))


@given(_RESULTS)
def test_batch_results_encode_byte_for_byte(results: list[Any]) -> None:
    """The one-join path (no Err in the batch) and the per-item loop (an Err in it) both give
    struct_pack's bytes: ok(b) = 01 b, ok(void) = 01, Err(c) = 00 + c as i32."""

    def item(v: Any, void: bool) -> bytes:
        if isinstance(v, Err):
            return b"\x00" + struct.pack("<i", v.code)
        return b"\x01" if void else b"\x01" + bytes([bool(v)])

    for rpc, void in (("BatchExistKey", False), ("BatchPutEnd", True)):
        codec = RPCS[rpc].response
        values = [None if void and not isinstance(v, Err) else v for v in results]
        body = codec.encode(values, literal=False)
        width = 0 if len(values) < 256 else 1
        n = struct.pack("<B" if width == 0 else "<H", len(values))
        assert body[-(len(n) + sum(len(item(v, void)) for v in values)) :] == n + b"".join(
            item(v, void) for v in values
        )
        assert codec.decode(body) == values


def test_remembered_strings_encode_as_fresh_ones() -> None:
    """Strings an encoder remembers (short ones, up to its bound) and the ones it does not
    (long, or past the bound, or at another width) give the same bytes and read back."""
    codec = RPCS["GetReplicaListByRegex"].response
    rep = [ReplicaDescriptor(1, MemoryDescriptor(BufferDescriptor(8, 64, "tcp", "h:1")), 3)]
    for n in (3, 300, 3000):  # 3000 distinct keys: past the bound, and 2-byte lengths
        reply = {f"key-{i}" + "x" * (i % 90): rep for i in range(n)}
        first = codec.encode(reply, literal=False)
        assert codec.encode(reply, literal=False) == first
        assert codec.decode(first) == reply
    replica = struct.pack("<QBQQ", 1, 0, 8, 64) + b"\x03tcp\x03h:1" + struct.pack("<i", 3)
    for _ in range(2):  # fresh, then remembered
        body = codec.encode({"k": rep}, literal=False)
        assert body[4:] == b"\x01" + b"\x01" + b"\x01k" + b"\x01" + replica


@pytest.mark.parametrize(
    "keys",
    [
        ["a" * 64] * 128,  # equal-length ASCII keys: the one-struct-call path
        [f"k{i:03d}" for i in range(200)],
        ["a" * 64] * 127 + ["b" * 63],  # one length differs: the loop
        ["\u00e9" * 10] * 5,  # not ASCII: the loop (UTF-8)
        ["x\udcff"] * 3,  # a surrogate escape: the loop keeps it
        [""] * 4,
        [],
    ],
)
def test_string_vectors_decode_the_same_on_both_paths(keys: list[str]) -> None:
    codec = RPCS["BatchExistKey"].request
    assert codec is not None
    body = codec.encode((keys, "default"))
    assert codec.decode(body) == (keys, "default")
    for cut in (1, 5, len(body) // 2):
        with pytest.raises(WireError):
            codec.decode(body[:-cut])
