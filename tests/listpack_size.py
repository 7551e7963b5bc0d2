"""Listpack bytes of a namespace's block hashes, beside Redis's MEMORY USAGE of each.

jemalloc rounds a listpack up to its size class (256, 320, 384 ... bytes), so what a field
saves shows only when the hash crosses a class edge; this prints how far below the edge the
hashes sit. The size is computed from HGETALL as Redis 7.0 encodes a listpack: a 6-byte header,
a 1-byte end, and per entry its encoding byte(s), data and back-length (an integer string as
the smallest integer encoding that holds it).

    python3 tests/listpack_size.py redis://127.0.0.1:26420/0 [namespace] [sample]
"""

from __future__ import annotations

import collections
import re
import sys

import redis

INT = re.compile(rb"-?(0|[1-9][0-9]{0,18})")


def entry_bytes(b: bytes) -> int:
    if INT.fullmatch(b) and -(2**63) <= int(b) < 2**63:
        v = int(b)
        for n, lo, hi in ((1, 0, 127), (2, -4096, 4095), (3, -(2**15), 2**15 - 1)):
            if lo <= v <= hi:
                return n + 1
        for n, bits in ((4, 23), (5, 31)):
            if -(2**bits) <= v < 2**bits:
                return n + 1
        return 10
    n = len(b) + (1 if len(b) < 64 else 2 if len(b) < 4096 else 5)
    return n + (1 if n < 128 else 2 if n < 16384 else 3)


def listpack_bytes(fields: dict[bytes, bytes]) -> int:
    return 7 + sum(entry_bytes(f) + entry_bytes(v) for f, v in fields.items())


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/0"
    ns = sys.argv[2] if len(sys.argv) > 2 else "*"
    sample = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    r = redis.Redis.from_url(url)
    seen: collections.Counter[tuple[int, int]] = collections.Counter()
    for i, k in enumerate(r.scan_iter(match="{" + ns + ":*}:n:*", count=1000)):
        if i >= sample:
            break
        if r.object("encoding", k) != b"listpack":
            continue
        size = listpack_bytes(r.hgetall(k))
        seen[(int(r.memory_usage(k, samples=0) or 0), size)] += 1
    print("MEMORY USAGE  listpack bytes  hashes")
    for (usage, size), n in sorted(seen.items()):
        print(f"{usage:12d}  {size:14d}  {n:6d}")


if __name__ == "__main__":
    main()
