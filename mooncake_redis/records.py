"""The formats the store scripts reply and keep: replies, outbox entries, allocation records.

One place per format, since the segments, objects, janitor and fsck all decode them. Every
64-bit quantity (offset, length, segment base and size, allocated bytes) is kept in Redis as a
u64: 16 lowercase hex characters (``lua/includes/u64.lua``), never as a Lua or cjson number.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from .errors import MooncakeError
from .keys import HASH_FIELDS, HEX64

FreePair = tuple[int, str]  # (shard, outbox entry "segment id|offset|put id")


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _err(reply: Sequence[Any]) -> MooncakeError | None:
    code = int(reply[0])
    return None if code == 0 else MooncakeError(code, _s(reply[1]))


U64_MAX = (1 << 64) - 1


def object_prefix(key: str, fields: Any) -> str:
    """The radix prefix of object ``key`` from its HASH fields (str -> str): ``pfx`` when
    stored, else the key's head of length ``pl``, else the key itself (keys.py, the object
    fields; ``store_prefix`` in lua/includes/store.lua)."""
    if fields.get("pfx") is not None:
        return str(fields["pfx"])
    if fields.get("pl") is not None:
        return key[: int(fields["pl"])]
    return key


OBJECT_FIELDS = frozenset(HASH_FIELDS["obj"].values())
_OBJECT_FIELDS_B = frozenset(f.encode() for f in OBJECT_FIELDS)


def object_fields(raw: dict[Any, Any]) -> dict[str, str]:
    """The object fields of an object HASH's HGETALL (bytes or str), decoded: ``{}`` when it
    holds no object. A block key's object shares its block hash with the radix node
    (keys.KeySchema.obj), whose fields (binary child edges too) are dropped; every object
    has a put id."""
    out = {_s(k): _s(v) for k, v in raw.items() if k in OBJECT_FIELDS or k in _OBJECT_FIELDS_B}
    return out if HASH_FIELDS["obj"]["put_id"] in out else {}


def u64hex(n: int) -> str:
    """An integer in [0, 2^64) as Redis keeps it: 16 lowercase hex characters."""
    if not 0 <= n <= U64_MAX:
        raise ValueError(f"{n} is not an unsigned 64-bit integer")
    return format(n, "016x")


def from_u64hex(value: Any) -> int:
    return int(_s(value), 16)


SegmentTable = dict[str, list[str]]  # ref -> [segment id, base, ep, proto, name]


def segment_table(raw: dict[Any, Any]) -> SegmentTable:
    """A shard's segment table (``HGETALL {<ns>:<i>}:segs``, store.lua) as ref -> fields."""
    out: SegmentTable = {}
    for k, v in raw.items():
        ref = _s(k)
        if ref[:1] not in ("=", "#"):
            out[ref] = [str(x) for x in json.loads(_s(v))]
    return out


def client_table(raw: dict[Any, Any]) -> tuple[dict[str, str], list[str]]:
    """A shard's client table (``HGETALL {<ns>:<i>}:cids``, store.lua) as ref -> client id, and
    what is inconsistent in it: a ref and its ``=`` entry that do not name each other, or the
    ``#`` counter below a ref (the next client would get a ref already in use)."""
    refs: dict[str, str] = {}
    back: dict[str, str] = {}
    last = 0
    for k, v in raw.items():
        field, value = _s(k), _s(v)
        if field == "#":
            last = int(value) if value.isdigit() else -1
        elif field[:1] == "=":
            back[field[1:]] = value
        else:
            refs[field] = value
    problems = [f"ref {r} -> {c!r}, whose '=' entry is {back.get(c)!r}"
                for r, c in refs.items() if back.get(c) != r]  # fmt: skip
    problems += [f"'={c}' -> {r}, which is not its ref"
                 for c, r in back.items() if refs.get(r) != c]  # fmt: skip
    top = max((int(r) for r in refs if r.isdigit()), default=0)
    if refs and last < top:
        problems.append(f"'#' is {last}, below ref {top}")
    return refs, problems


def replica_records(raw: str, table: SegmentTable) -> list[dict[str, Any]]:
    """An object's replica record (field ``r``: ``id,st,ref,off,len`` joined by ``;``, off and
    len hex without leading zeros) as the dicts the scripts reply (u64 fields 16-hex strings).
    Raises ValueError for a malformed record or a ref the shard's segment table lacks."""
    out: list[dict[str, Any]] = []
    for part in raw.split(";") if raw else []:
        fields = part.split(",")
        if len(fields) != 5 or fields[2] not in table:
            raise ValueError(f"replica record {part!r}: malformed or unknown segment ref")
        rid, st, ref, off, length = fields
        seg, base, ep, proto, name = table[ref]
        out.append(
            {
                "id": rid,
                "st": st,
                "seg": seg,
                "off": u64hex(int(off, 16)),
                "len": u64hex(int(length, 16)),
                "base": base,
                "ep": ep,
                "proto": proto,
                "name": name,
            }
        )
    return out


def decode_replicas(raw: str, table: SegmentTable) -> list[dict[str, Any]]:
    """An object's replica records (field ``r``) with their u64 fields and id as integers."""
    out = replica_records(raw, table)
    for rep in out:
        for name in ("off", "len", "base"):
            rep[name] = int(rep[name], 16)
        rep["id"] = int(rep["id"])
    return out


def parse_entry(entry: str) -> tuple[str, int, str]:
    """``"segment id|offset|put id"`` (the segment id may contain ``|``; offset u64 hex)."""
    rest, pid = entry.rsplit("|", 1)
    seg, off = rest.rsplit("|", 1)
    return seg, int(off, 16), pid


class AllocRecord(NamedTuple):
    """One allocation record of a segment (lua/includes/alloc.lua)."""

    length: int
    put_id: str
    ms: int | None  # the allocation's Redis time while pending; None once confirmed
    owner: str  # the object key


def alloc_owner(key: str) -> bytes:
    """The owner field of an allocation record: ``>`` + the 32 bytes of a key's leading 64
    lowercase hex digits (a block hash) + the rest of the key, else ``<`` + the key."""
    if HEX64.match(key):
        return b">" + bytes.fromhex(key[:64]) + key[64:].encode("utf-8", "surrogatepass")
    return b"<" + key.encode("utf-8", "surrogatepass")


def alloc_owner_key(raw: Any) -> str:
    """The key an owner field (:func:`alloc_owner`) names."""
    b = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")
    if b[:1] == b">" and len(b) >= 33:
        if len(b) == 33:  # a block hash alone (every node's parent field): no tail to decode
            return b[1:].hex()
        return b[1:33].hex() + b[33:].decode("utf-8", "surrogatepass")
    if b[:1] == b"<":
        return b[1:].decode("utf-8", "surrogatepass")
    raise ValueError(f"malformed allocation owner {b!r}")


def node_parent_hash(raw: Any) -> str:
    """The parent hash a node's field ``p`` holds (``keys.node_parent_field``), as the eviction
    reads return it: the owner form of :func:`alloc_owner_key` ('' for none), decoded here, not
    per row in Lua."""
    return alloc_owner_key(raw) if raw else ""


def parse_alloc_record(rec: Any, owner: Any) -> AllocRecord:
    """A record ``"len|put id|ms"`` (len hex without leading zeros, ms empty once confirmed)
    and its owner field."""
    length, pid, ms = _s(rec).split("|", 2)
    return AllocRecord(int(length, 16), pid, int(ms) if ms else None, alloc_owner_key(owner))


def alloc_offset(bucket: str, rel: str, shift: int) -> int:
    """The offset of the record ``rel`` of bucket ``bucket`` (hex: offset >> shift, offset mod
    2^shift)."""
    return (int(bucket, 16) << shift) + int(rel, 16)


def alloc_bucket_of(offset: int, shift: int) -> tuple[str, str]:
    """(bucket, field) of the record of the allocation at ``offset`` (hex, no leading zeros)."""
    return format(offset >> shift, "x"), format(offset & ((1 << shift) - 1), "x")


def bucket_records(bucket: str, shift: int, raw: dict[Any, Any]) -> dict[int, AllocRecord]:
    """A record bucket's HGETALL (``{<ns>:s:<segment>}:a:<bucket>``) as offset -> record."""
    fields = {_s(k): v for k, v in raw.items()}
    out: dict[int, AllocRecord] = {}
    for name, value in fields.items():
        if not name.endswith("k"):
            out[alloc_offset(bucket, name, shift)] = parse_alloc_record(
                value, fields.get(name + "k", b"<")
            )
    return out
