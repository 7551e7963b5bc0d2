"""Writes :mod:`.rpcs`: one client method per row of :data:`~mooncake_redis.server.schemas.RPCS`,
with the signature of the :class:`~mooncake_redis.MasterService` method of the same name.

    python -m mooncake_redis.client.generate        # rewrite mooncake_redis/client/rpcs.py
    python -m mooncake_redis.client.generate --check

The methods are generated, not written by hand twice (sync and async), and not built at import
time either: a generated module keeps exact static types for mypy and editors and costs nothing
at import (the service, which the signatures come from, is only imported here). A test fails
when the module is stale.
"""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys
from pathlib import Path

from ..server.schemas import RPCS, Rpc

TARGET = Path(__file__).with_name("rpcs.py")

HEADER = '''"""The client methods, one per RPC. GENERATED from the RPC table and MasterService's
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
from .base import AsyncClient, SyncClient

__all__ = ["AsyncMasterClient", "MasterClient"]
'''

CLASSES = {
    "AsyncMasterClient": (
        "AsyncClient",
        "async ",
        "await ",
        """Async client: ``async with AsyncMasterClient("http://127.0.0.1:50051") as c: ...``.

    ``url`` may list several workers (a sequence or comma-separated); a connection failure moves
    to the next one. ``transport`` is for tests (e.g. ``httpx.ASGITransport(app)``).
    """,
    ),
    "MasterClient": (
        "SyncClient",
        "",
        "",
        """Blocking client with the same methods: ``with MasterClient(url) as c: c.exist_key(k)``.

    Thread-safe (each call takes its own keep-alive connection).
    """,
    ),
}


def _signature(rpc: Rpc) -> tuple[str, str, list[str]]:
    """(parameters, return annotation, parameter names) of MasterService.<rpc.name>."""
    from ..service import MasterService

    sig = inspect.signature(getattr(MasterService, rpc.name))
    params = ["self"]
    names = []
    star = False
    for p in list(sig.parameters.values())[1:]:
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = f"{p.name}: {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
        names.append(p.name)
    return ", ".join(params), str(sig.return_annotation), names


def _method(rpc: Rpc, async_: str, await_: str) -> str:
    params, returns, names = _signature(rpc)
    args = "{" + ", ".join(f'"{n}": {n}' for n in names) + "}"
    call = f'{await_}self._call(RPCS["{rpc.name}"], {args})'
    if returns == "None":
        body = f"        {call}\n"
    else:
        body = f"        result: {returns} = {call}\n        return result\n"
    doc = rpc.summary or rpc.name
    return f'    {async_}def {rpc.name}({params}) -> {returns}:\n        """{doc}"""\n{body}'


def source() -> str:
    """The module's text, formatted as ``ruff format`` would."""
    parts = [HEADER]
    for name, (base, async_, await_, doc) in CLASSES.items():
        parts.append(f'\n\nclass {name}({base}):\n    """{doc}"""\n')
        for rpc in RPCS.values():
            parts.append("\n" + _method(rpc, async_, await_))
    text = "".join(parts)
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mooncake_redis.client.generate")
    p.add_argument("--check", action="store_true", help="exit 1 if rpcs.py is stale")
    args = p.parse_args(argv)
    text = source()
    if args.check:
        stale = not TARGET.exists() or TARGET.read_text() != text
        print(f"{TARGET}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
