"""Fuzzing the HTTP API from its own OpenAPI document (schemathesis, in process).

Every operation of ``/openapi.json`` gets schemathesis's generated requests (examples, coverage
and hypothesis fuzzing; valid and schema-violating bodies; other methods on each path) against
one worker app on an embedded fakeredis store (radix on, one large segment mounted so puts can
allocate). Before each operation the store is seeded with COMPLETE, leased and PROCESSING
objects and two radix nodes; about half of the fuzzed bodies are then steered onto those names
(known keys, prefix hashes, the mounted client, sane slice lengths), so that conflicts, leases
and successful writes are reached and not only the library's input checks. Per request:

- no hang: each call has a 10 s timeout (and pytest-timeout bounds the file);
- no 5xx: the only one allowed is 507 NO_AVAILABLE_HANDLE (503 means Redis is unavailable,
  which cannot happen on fakeredis);
- every non-2xx body is ``{"error": {"code": int, "name": str, "message": str}}`` with a
  Mooncake ``ErrorCode`` whose name matches its code, on the status :data:`HTTP_STATUS` gives;
- schemathesis's checks: ``not_a_server_error``, ``status_code_conformance``,
  ``content_type_conformance`` and ``response_schema_conformance``;
- no state change from a rejected request: a request answered 4xx leaves the namespace exactly as
  it was (every key and value, :func:`mooncake_redis.testing.probes.snapshot`). Batch RPCs
  answer 200 with per-item errors; those are not rejections and may change state.

``MCR_HTTP_FUZZ_EXAMPLES`` raises the number of fuzzed examples per operation (default 6).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import checks

from mooncake_redis import Config, ErrorCode
from mooncake_redis.server.app import ServerSettings, create_app
from mooncake_redis.server.schemas import http_status
from mooncake_redis.testing.probes import snapshot_diff
from tests.helpers import h

EXAMPLES = int(os.environ.get("MCR_HTTP_FUZZ_EXAMPLES", "6"))
CALL_TIMEOUT_S = 30.0
TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE_URL = "http://worker"
CLIENT = "fuzz-client"
SEGMENT = {"segment": {"id": "seg-fuzz", "size": 1 << 40}, "client_id": CLIENT}
PREFIXES = [h(0), h(1), h(2)]  # h(0) root, h(1) its child, h(2) unregistered
COMPLETE = [f"{h(0)}_0", f"{h(1)}_0", "obj-a", "obj-b"]  # COMPLETE; the first one leased
PROCESSING = "obj-proc"  # put_start without put_end
KEYS = [*COMPLETE, PROCESSING, "obj-absent", f"{h(2)}_0"]
# Field name -> values that name seeded state (or are simply valid), for steered bodies.
STEER: dict[str, st.SearchStrategy[Any]] = {
    "key": st.sampled_from(KEYS),
    "keys": st.lists(st.sampled_from(KEYS), max_size=4),
    "prefix_hash": st.sampled_from(PREFIXES),
    "parent_prefix_hash": st.sampled_from(["", *PREFIXES]),
    "client_id": st.sampled_from([CLIENT, "fuzz-other"]),
    "segment_id": st.sampled_from(["seg-extra", "seg-none"]),
    "id": st.sampled_from(["seg-extra", "seg-fuzz"]),
    "size": st.sampled_from([1 << 20, 1 << 30]),
    "slice_lengths": st.sampled_from([1024, [4096], [1, 2, 3]]),
    "replica_num": st.integers(1, 2),
    "pattern": st.sampled_from(["^obj-", "_0$", "proc", "(", ".*"]),
    "max_depth": st.integers(0, 3),
    "max_objects": st.integers(0, 2),
}
ALLOWED_5XX = {http_status(ErrorCode.NO_AVAILABLE_HANDLE)}  # 507
# Operations whose rejection may change state today (see test_remount_rejection_is_atomic):
# remount_segment checks each segment's id inside its own concurrent mount, so a request with
# one valid and one invalid segment mounts the valid one (and refreshes the client) and answers
# 400. The fix belongs in mooncake_redis/segments.py (check every id and the client first).
KNOWN_BUG: set[str] = set()  # operations whose rejections may still change state (none)
ROUTING = {404, 405}  # no such path, wrong method: answered before any endpoint runs
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def make_settings() -> ServerSettings:
    cfg = Config(
        redis_url=f"fakeredis://{uuid.uuid4().hex}",
        enable_radix_tree=True,
        num_shards=8,
        max_key_length=200,
    )
    # No background task may touch the namespace between the two snapshots of a request.
    return ServerSettings(config=cfg, token=TOKEN, janitor=False, fsck_interval_s=0, evictor="off")


# The document comes from an app that is never started: building it needs no store.
schema = schemathesis.openapi.from_dict(create_app(make_settings()).openapi())


@dataclass
class Target:
    """One started worker app, its event loop and a client on its ASGI transport."""

    loop: asyncio.AbstractEventLoop
    app: Any
    client: httpx.AsyncClient
    statuses: dict[str, dict[int, int]] = field(default_factory=dict)
    known: list[str] = field(default_factory=list)  # diffs of KNOWN_BUG rejections

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def post(self, rpc: str, body: dict[str, Any]) -> httpx.Response:
        return await asyncio.wait_for(
            self.client.post(f"/v1/{rpc}", json=body, headers=AUTH), CALL_TIMEOUT_S
        )


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    loop = asyncio.new_event_loop()
    app = create_app(make_settings())
    lifespan = app.router.lifespan_context(app)
    loop.run_until_complete(lifespan.__aenter__())
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url=BASE_URL, timeout=CALL_TIMEOUT_S
    )
    t = Target(loop, app, client)
    try:
        yield t
    finally:
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()
        total = sum(sum(c.values()) for c in t.statuses.values())
        print(f"\nHTTP fuzz: {total} requests")
        for op, counts in sorted(t.statuses.items()):
            print(f"  {op}: {dict(sorted(counts.items()))}")
        print(f"  state changed by {len(t.known)} rejected requests of KNOWN_BUG operations")


async def seed(t: Target) -> None:
    """Puts the state the steered bodies name back (a previous operation may have removed it)."""
    r = await t.post("mount_segment", SEGMENT)
    assert r.status_code == 200, r.text
    for key in COMPLETE:
        # An upsert: whatever a previous operation left (an upsert in progress included), the
        # key ends COMPLETE and this client's.
        body = {"client_id": CLIENT, "key": key, "slice_lengths": [1024]}
        r = await t.post("upsert_start", body)
        assert r.status_code == 200, r.text
        r = await t.post("put_end", {"client_id": CLIENT, "key": key})
        assert r.status_code == 200, r.text
    r = await t.post("put_start", {"client_id": CLIENT, "key": PROCESSING, "slice_lengths": [1024]})
    assert r.status_code in (200, 409), r.text
    r = await t.post("get_replica_list", {"key": COMPLETE[0]})  # grants a lease
    assert r.status_code == 200, r.text
    r = await t.post(
        "register_radix_tree_node",
        {"prefix_hash": h(0), "parent_prefix_hash": "", "keys": [f"{h(0)}_0"]},
    )
    assert r.status_code == 200, r.text
    r = await t.post(
        "register_radix_tree_node",
        {"prefix_hash": h(1), "parent_prefix_hash": h(0), "keys": [f"{h(1)}_0"]},
    )
    assert r.status_code == 200, r.text


@pytest.fixture
def seeded(target: Target) -> Target:
    target.run(seed(target))
    return target


async def fast_snapshot(t: Target) -> dict[str, Any]:
    """Key -> (type, value) of the whole namespace, as
    :func:`mooncake_redis.testing.probes.snapshot` (shard stats counters at 0 count as absent)
    but in two pipelined round trips."""
    svc = t.app.state.worker.svc()
    client = svc.backend.client
    keys = sorted({k async for k in client.scan_iter(match="{" + svc.config.namespace + ":*")})
    keys = [k for k in keys if k != svc.keys.global_key("janitor").encode()]
    pipe = client.pipeline(transaction=False)
    for k in keys:
        pipe.type(k)
    kinds = [x.decode() if isinstance(x, bytes) else x for x in await pipe.execute()]
    read = {"hash": "hgetall", "set": "smembers", "list": "lrange", "string": "get"}
    pipe = client.pipeline(transaction=False)
    for k, kind in zip(keys, kinds):
        if kind == "zset":
            pipe.zrange(k, 0, -1, withscores=True)
        elif kind == "list":
            pipe.lrange(k, 0, -1)
        elif kind in read:
            getattr(pipe, read[kind])(k)
        else:
            pipe.type(k)
    values = await pipe.execute()
    out: dict[str, Any] = {}
    for k, kind, v in zip(keys, kinds, values):
        if kind == "hash":
            v = sorted(v.items())
            if k.endswith(b"}:stats"):  # a counter at 0 is the same as no counter
                v = [(f, x) for f, x in v if x != b"0"]
                if not v:
                    continue
        elif kind in ("set", "zset"):
            v = sorted(v)
        out[k.decode("utf-8", "surrogateescape")] = (kind, v)
    return out


def steer(body: Any, data: st.DataObject) -> Any:
    """The body with some fields replaced by values that name seeded state."""
    if isinstance(body, list):
        return [steer(x, data) for x in body]
    if not isinstance(body, dict):
        return body
    out = {}
    for name, value in body.items():
        if name in STEER and data.draw(st.booleans()):
            out[name] = data.draw(STEER[name])
        else:
            out[name] = steer(value, data)
    if isinstance(out.get("keys"), list) and "slice_lengths" in out:  # batch_put_start
        out["slice_lengths"] = [1024] * len(out["keys"])
    return out


def check_error_body(resp: httpx.Response) -> None:
    body = resp.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    e = body["error"]
    assert isinstance(e, dict) and set(e) == {"code", "name", "message"}, e
    assert isinstance(e["code"], int) and isinstance(e["name"], str), e
    assert isinstance(e["message"], str), e
    code = ErrorCode(e["code"])  # a Mooncake code, or ValueError
    assert code.name == e["name"], e
    if code == ErrorCode.ILLEGAL_CLIENT:  # the bearer check answers 401, the library 403
        assert resp.status_code in (401, 403), (resp.status_code, e)
    elif resp.status_code != http_status(code):  # Starlette's own refusals keep their status
        assert resp.status_code in ROUTING and code == ErrorCode.INVALID_PARAMS, (
            resp.status_code,
            e,
        )


async def settle() -> None:
    """Waits for tasks a request left running after its answer (none but this one run here:
    no janitor, fsck or evictor); a request whose work outlives it fails as a hang."""
    deadline = asyncio.get_running_loop().time() + CALL_TIMEOUT_S
    me = asyncio.current_task()
    while pending := [x for x in asyncio.all_tasks() if x is not me and not x.done()]:
        assert asyncio.get_running_loop().time() < deadline, f"still running: {pending}"
        await asyncio.sleep(0.001)


async def send(t: Target, kwargs: dict[str, Any]) -> tuple[httpx.Response, Any, Any]:
    before = await fast_snapshot(t)
    content = kwargs.get("data")
    if content is None and "json" in kwargs:
        json_body: Any = kwargs["json"]
    else:
        json_body = None
    resp = await asyncio.wait_for(
        t.client.request(
            kwargs["method"],
            kwargs["url"],
            headers=kwargs.get("headers"),
            params=kwargs.get("params"),
            content=content,
            json=json_body,
        ),
        CALL_TIMEOUT_S,
    )
    await settle()
    after = await fast_snapshot(t) if 400 <= resp.status_code < 500 else before
    return resp, before, after


def exercise(t: Target, case: Any, kwargs: dict[str, Any]) -> None:
    """One request and every check on its answer."""
    resp, before, after = t.run(send(t, kwargs))
    op = f"{kwargs['method'].upper()} {case.path}"
    counts = t.statuses.setdefault(op, {})
    counts[resp.status_code] = counts.get(resp.status_code, 0) + 1

    assert resp.status_code < 500 or resp.status_code in ALLOWED_5XX, (
        f"{op} {kwargs.get('json')!r} -> {resp.status_code}: {resp.text}"
    )
    if resp.status_code >= 400:
        check_error_body(resp)
    if 400 <= resp.status_code < 500:
        diff = snapshot_diff(before, after)
        if diff and case.path in KNOWN_BUG:
            t.known.append(f"{op}: {diff}")
            return
        assert not diff, (
            f"{op} {kwargs.get('json')!r} rejected with {resp.text} but changed state: {diff}"
        )
    case.validate_response(resp, checks=CHECKS)


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@schema.parametrize()
@FUZZ
@pytest.mark.timeout(120)
def test_generated(case: Any, seeded: Target) -> None:
    """Schemathesis's cases as generated: examples, coverage (boundaries, every violation of the
    schema, other methods) and fuzzing."""
    exercise(seeded, case, case.as_transport_kwargs(base_url=BASE_URL, headers=AUTH))


@schema.given(data=st.data())
@schema.parametrize()
@FUZZ
@pytest.mark.timeout(120)
def test_steered(case: Any, data: st.DataObject, seeded: Target) -> None:
    """Fuzzed bodies with some fields steered onto the seeded state (see :data:`STEER`)."""
    kwargs = case.as_transport_kwargs(base_url=BASE_URL, headers=AUTH)
    if "json" in kwargs:
        kwargs["json"] = steer(kwargs["json"], data)
    exercise(seeded, case, kwargs)


def test_remount_rejection_is_atomic(target: Target) -> None:
    async def go() -> tuple[httpx.Response, list[str]]:
        before = await fast_snapshot(target)
        segments = [{"id": "seg-remount-ok", "size": 1 << 20}, {"id": "", "size": 1 << 20}]
        resp = await target.post("remount_segment", {"segments": segments, "client_id": "rc"})
        await settle()
        return resp, snapshot_diff(before, await fast_snapshot(target))

    resp, diff = target.run(go())
    assert resp.status_code == 400, resp.text
    assert not diff, diff
