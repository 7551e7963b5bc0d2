"""The package's shape (issue 12): no import cycle between its modules, counting the imports under
``TYPE_CHECKING`` and the ones inside functions (a cycle there still means two modules that
cannot be understood, or changed, one without the other); no module over 450 lines; and the
client library loads neither the service nor redis.

Imports are read with ``ast`` from the source, never by importing it, so a cycle is found even
where Python would resolve it at run time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mooncake_redis"
MAX_LINES = 450


def module_names() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module ``name`` loads from the package (a name inside a module: that module)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every package module that ``name`` imports, wherever the import stands."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # ``from pkg import mod`` imports the submodule; ``from mod import name`` the module.
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                for alias in node.names
            ]
        for target in targets:
            known = _known(target, modules)
            if known is not None and known != name:
                found.add(known)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_imports_under_type_checking_and_in_functions() -> None:
    """The reader must count the imports that make today's cycles easy to miss."""
    graph = import_graph()
    assert "mooncake_redis.service" in graph["mooncake_redis.fsck.radix"]  # TYPE_CHECKING only
    assert "mooncake_redis.fsck" in graph["mooncake_redis.server.metrics"]
    assert "mooncake_redis.cli.inspect_view" in graph["mooncake_redis.cli.inspect"]  # in a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package() -> None:
    graph = import_graph()
    found = cycles(graph)
    detail = "\n".join(
        "cycle of " + str(len(c)) + ":\n"
        + "\n".join(f"  {m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c)
        for c in found
    )  # fmt: skip
    assert not found, (
        "import cycles (TYPE_CHECKING and function-level imports included):\n" + detail
    )


def test_no_module_over_450_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in module_names().items()}
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"


def test_the_client_loads_neither_the_service_nor_redis() -> None:
    code = (
        "import sys, json, mooncake_redis.client\n"
        "print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('mooncake_redis', 'redis'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    loaded = set(ast.literal_eval(out))
    service_side = {
        m
        for m in loaded
        if m == "redis"
        or m.startswith(("redis.", "mooncake_redis.eviction", "mooncake_redis.fsck"))
        or m.rpartition(".")[2]
        in {"service", "service_base", "store", "backend", "radix", "lua_loader", "keys"}
    }
    assert "mooncake_redis.client" in loaded
    assert not service_side, f"import mooncake_redis.client loads {sorted(service_side)}"
