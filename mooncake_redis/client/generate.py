"""Writes :mod:`.sync_rpcs` and :mod:`.async_rpcs`: one client method per row of
:data:`~mooncake_redis.server.schemas.RPCS`, with the signature of the
:class:`~mooncake_redis.MasterService` method of the same name, in each of the two clients.

    python -m mooncake_redis.client.generate        # rewrite both modules
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

HERE = Path(__file__).parent
TARGETS = {"AsyncMasterClient": HERE / "async_rpcs.py", "MasterClient": HERE / "sync_rpcs.py"}

HEADER = '''"""{name}'s methods, one per RPC. GENERATED from the RPC table and MasterService's
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
from .base import {base}

__all__ = ["{name}"]
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


def source(name: str) -> str:
    """The text of the module that holds client class ``name``, formatted as ``ruff format``
    would (ruff also drops the imports that class does not use)."""
    base, async_, await_, doc = CLASSES[name]
    parts = [HEADER.format(name=name, base=base)]
    parts.append(f'\n\nclass {name}({base}):\n    """{doc}"""\n')
    for rpc in RPCS.values():
        parts.append("\n" + _method(rpc, async_, await_))
    text = "".join(parts)
    target = str(TARGETS[name])
    fixed = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "F401", "--fix", "-q",
         "--stdin-filename", target, "-"],
        input=text, capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", target, "-"],
        input=fixed or text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def sources() -> dict[Path, str]:
    """Every generated module: its path and the text it must have."""
    return {TARGETS[name]: source(name) for name in CLASSES}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mooncake_redis.client.generate")
    p.add_argument("--check", action="store_true", help="exit 1 if a generated module is stale")
    args = p.parse_args(argv)
    wanted = sources()
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in TARGETS.values():
            print(f"{path}: {'stale' if path in stale else 'up to date'}")
        return 1 if stale else 0
    for path, text in wanted.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
