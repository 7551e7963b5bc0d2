"""Readable views of the ``inspect`` and ``fsck`` documents (rich): relative times instead of
Redis milliseconds, a legend for the one-letter fields, only the shards that hold something.

Everything printed from the store is escaped: keys and details may contain ``[...]``, which rich
would otherwise take for markup and drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

if TYPE_CHECKING:
    from ..fsck import FsckReport

# The fields of an object hash (``{ns:i}:o:<key>``; a block key's are in its block hash
# ``{ns:i}:n:<key>``, beside the node's), as the store scripts write them.
OBJECT_FIELDS: dict[str, str] = {
    "c": "client that put it: its ref in the shard's client table {ns:i}:cids",
    "w": "put started (Redis ms)",
    "z": "size in bytes",
    "S": "state: P put in progress, C complete",
    "l": "lease until (Redis ms; 0 = no lease)",
    "i": "put id",
    "pfx": "prefix hash: the radix node it belongs to (absent: see pl)",
    "pl": "the prefix is the key's first pl characters (neither pfx nor pl: the key itself)",
    "sp": "soft-pinned until (Redis ms)",
    "hp": "hard-pinned",
    "R": "registered in the radix index (2: with a pin or a stored prefix)",
}
TIME_FIELDS = frozenset({"w", "l", "sp"})
# Per-shard columns of ``inspect stats``; every counter is in the totals and in --json.
SHARD_COLUMNS = ("objects", "bytes", "nodes", "rkeys", "leaves")


def human_ms(ms: float) -> str:
    ms = abs(ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:.0f} min"
    if ms < 86_400_000:
        return f"{ms / 3_600_000:.1f} h"
    return f"{ms / 86_400_000:.1f} d"


def relative(then_ms: float, now_ms: float) -> str:
    """``3.2 s ago`` or ``in 1.5 s``."""
    delta = now_ms - then_ms
    return f"{human_ms(delta)} ago" if delta >= 0 else f"in {human_ms(delta)}"


def lease_line(lease: dict[str, str], now_ms: int) -> str:
    """The evictor lease hash (holder, epoch, expires_ms) in words."""
    if not lease:
        return "none (no evictor has run in this namespace yet)"
    holder, epoch = escape(lease.get("holder", "")), lease.get("epoch", "?")
    if not holder:
        return f"free (released by its last holder, epoch {epoch})"
    try:
        expires = int(float(lease.get("expires_ms", "0")))
    except ValueError:
        return f"held by {holder}, epoch {epoch} (expiry unreadable)"
    if expires > now_ms:
        return f"held by {holder}, epoch {epoch}, expires {relative(expires, now_ms)}"
    return f"free: expired {relative(expires, now_ms)} (last holder {holder}, epoch {epoch})"


def _console() -> Console:
    return Console(highlight=False, emoji=False)  # ":a:" in a key name is not an emoji code


def print_stats(doc: dict[str, Any]) -> None:
    con = _console()
    now = int(doc.get("now_ms", 0))
    con.print(
        f"[bold]namespace[/] {escape(doc['namespace'])}  shards {doc['num_shards']}  "
        f"store {escape(doc['redis'])}"
    )
    t = Table(title="totals")
    t.add_column("counter")
    t.add_column("value", justify="right")
    for k, v in sorted(doc["totals"].items()):
        t.add_row(escape(k), f"{v:,}" if isinstance(v, int) else escape(str(v)))
    con.print(t)
    rows = [r for r in doc["shards"] if any(r.get(c) for c in SHARD_COLUMNS)]
    if rows:
        cols = [c for c in SHARD_COLUMNS if any(c in r for r in rows)]
        st = Table(title=f"per shard ({len(rows)} of {doc['num_shards']} hold something)")
        st.add_column("shard", justify="right")
        for c in cols:
            st.add_column(c, justify="right")
        for r in rows:
            st.add_row(str(r["shard"]), *(f"{r.get(c, 0):,}" for c in cols))
        con.print(st)
    else:
        con.print(f"no shard holds anything (0 of {doc['num_shards']})")
    if doc["segments"]:
        sg = Table(title="segments")
        cols_s = ("id", "client_id", "size", "allocated", "mounted", "allocations", "pending")
        for c in cols_s:
            sg.add_column(c)
        for s in doc["segments"]:
            sg.add_row(*(escape(str(s.get(c, ""))) for c in cols_s))
        con.print(sg)
    clients = doc["clients"]
    live = sum(1 for c in clients.values() if c["live"])
    con.print(f"clients: {len(clients)} ({live} live)")
    for name, c in sorted(clients.items(), key=lambda kv: -kv[1]["last_ping_ms"])[:10]:
        state = "live" if c["live"] else "[red]expired[/]"
        con.print(f"  {escape(name)}: last ping {relative(c['last_ping_ms'], now)} ({state})")
    if len(clients) > 10:
        con.print(f"  ... and {len(clients) - 10} more (--json lists every one)")
    con.print(f"evictor lease: {lease_line(doc['evictor'], now)}")


def print_node(doc: dict[str, Any]) -> None:
    con = _console()
    now = int(doc.get("now_ms", 0))
    con.print(f"[bold]node[/] {escape(doc['prefix_hash'])}", soft_wrap=True)
    con.print(f"shard {doc['shard']}  tag {escape(doc['tag'])}")
    if not doc["exists"]:
        con.print("[red]no such node[/]")
        return
    kind = "shell" if doc["is_shell"] else ("leaf" if doc["is_leaf"] else "inner")
    parent = escape(doc["parent_prefix_hash"] or "(root)")
    shard = f" (shard {doc['parent_shard']})" if doc["parent_shard"] is not None else ""
    con.print(f"{kind}; parent {parent}{shard}", soft_wrap=True)
    con.print(
        f"created {relative(doc['created_ms'], now)}  score {doc['score']}  hits {doc['hits']}  "
        f"in leaf index {doc['in_leaf_index']}"
    )
    con.print(f"[bold]keys[/] ({len(doc['keys'])}):")
    for k in doc["keys"]:
        con.print(f"  {k}", markup=False, soft_wrap=True)
    con.print(f"[bold]children[/] ({len(doc['children'])}):")
    for c, info in doc["children"].items():
        con.print(
            f"  {escape(c)}  shard {info['shard']}  generation {info['generation']}",
            soft_wrap=True,
        )
    con.print("[bold]redis-cli[/]:")
    for cmd in doc["redis_cli"]:
        con.print(f"  redis-cli {cmd}", markup=False, soft_wrap=True)


def print_key(doc: dict[str, Any]) -> None:
    con = _console()
    now = int(doc.get("now_ms", 0))
    con.print(f"[bold]key[/] {escape(doc['key'])}", soft_wrap=True)
    con.print(
        f"prefix {escape(doc['prefix_hash'])}  shard {doc['shard']}  "
        f"redis key {escape(doc['redis_key'])}",
        soft_wrap=True,
    )
    if not doc["exists"]:
        con.print("[red]no such object[/]")
    else:
        meta = {k: v for k, v in doc["metadata"].items() if k != "r"}
        t = Table(box=None, show_header=True, pad_edge=False)
        t.add_column("field")
        t.add_column("value", overflow="fold")
        t.add_column("meaning")
        for k, v in sorted(meta.items()):
            value = escape(v)
            if k in TIME_FIELDS and v.isdigit() and int(v) > 0:
                value += f" ({relative(int(v), now)})"
            elif k == "c" and doc.get("client_id") is not None:
                value += f" ({escape(doc['client_id'])})"
            t.add_row(escape(k), value, OBJECT_FIELDS.get(k, ""))
        con.print(t)
        for r in doc["replicas"] or []:
            con.print(f"  replica {r}", markup=False, soft_wrap=True)
        for a in doc.get("allocations", []):
            con.print(
                f"  allocation {a['segment']}@{a['offset']}: {a['record']}"
                + (f"  ({a['redis_cli']})" if "redis_cli" in a else ""),
                markup=False,
                soft_wrap=True,
            )
    con.print(f"registered in its radix node: {doc['registered_in_node']}")


def _short(h: str, n: int = 12) -> str:
    return h if len(h) <= n + 3 else h[:n] + "…"


def print_tree(doc: dict[str, Any]) -> None:
    nodes = {n["prefix_hash"]: n for n in doc["nodes"]}

    def label(n: dict[str, Any]) -> str:
        kind = "shell" if n["is_shell"] else ("leaf" if n["is_leaf"] else "node")
        return (
            f"{escape(_short(n['prefix_hash']))} "
            f"[dim]shard {n['shard']} {kind} {len(n['keys'])} keys[/]"
        )

    root = nodes[doc["root"]]
    tree = Tree(label(root))
    stack = [(root, tree)]
    seen = {doc["root"]}
    while stack:
        n, branch = stack.pop()
        for c in n["children"]:
            if c in nodes and c not in seen:
                seen.add(c)
                stack.append((nodes[c], branch.add(label(nodes[c]))))
            elif c not in nodes:
                branch.add(f"{escape(_short(c))} [dim](below --depth)[/]")
    con = _console()
    con.print(tree)
    # Depth counts nodes on the longest chain, the node itself included: as fsck's max_depth.
    depth = doc["depth_reached"] + 1
    con.print(
        f"{len(nodes)} nodes, {len(doc['keys'])} keys, depth {depth} "
        f"(nodes on the longest chain from this node, as fsck counts)"
        + (" (truncated: more below --depth)" if doc["truncated"] else "")
    )


def print_fsck(report: FsckReport, where: str, *, repair: bool, grace_ms: int) -> None:
    from ..fsck import ALLOWED_KINDS

    con = _console()
    con.print(f"[bold]fsck[/] {escape(where)}")
    counts = dict(report.counts)
    depth = counts.pop("max_depth", None)
    con.print(escape("  ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))))
    if depth is not None:
        con.print(f"max depth {depth} (nodes on the longest chain from a root)")

    def why(kind: str, age_ms: int | None) -> str:
        if kind in ALLOWED_KINDS and (age_ms is None or age_ms <= grace_ms):
            return (
                f"younger than the grace period ({grace_ms} ms): a link may still be in "
                "progress; --grace-ms 0 repairs it now"
            )
        return f"fsck has no safe repair for {kind}"

    for p in report.problems:
        if p.repaired:
            state = "[green]repaired[/]"
        else:
            state = "[red]not repaired[/]" if repair else "[red]problem[/]"
        con.print(f"{state} {escape(p.kind)} {escape(p.node)}: {escape(p.detail)}", soft_wrap=True)
        if repair and not p.repaired:
            con.print(f"  why: {escape(why(p.kind, p.age_ms))}")
    fixed = sum(1 for p in report.problems if p.repaired)
    left = len(report.problems) - fixed
    if report.clean:
        con.print("[green]clean[/]" + (f" after repairing {fixed} problems" if fixed else ""))
    elif repair:
        con.print(
            f"[red]not clean: could not repair {left} of {len(report.problems)} problems[/] "
            f"({escape(_kinds(report.kinds()))}); repaired {fixed}"
        )
    else:
        con.print(
            f"[red]not clean[/]: {escape(_kinds(report.kinds()))}; "
            "fsck --repair fixes what is safe to fix"
        )


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
