"""Loads ``lua/*.lua``: expands ``--!include name.lua`` from ``lua/includes/``, parses headers.

Every script file starts with a ``#!lua`` shebang line, then a comment header (KEYS, ARGV,
returns, errors). Each include declares the includes it needs itself (``--!include`` lines at its
top), so a script names only what it uses directly. Includes are expanded depth first, each once
per script: one reached a second time (two includes needing ``common.lua``) is skipped, and a
cycle is an error at load time, not a surprise in production. The key-name helpers and the HASH
field names come from generated includes (``keys.lua``, ``fields.lua``) so that
:mod:`mooncake_redis.keys` stays the only place naming keys and fields.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from .errors import ErrorCode
from .keys import lua_field_names, lua_key_functions

INCLUDE_RE = re.compile(r"^--!include\s+([A-Za-z0-9_./-]+\.lua)\s*$")


def lua_error_codes() -> str:
    """``E.NAME = number`` for every Mooncake error code, generated from :class:`ErrorCode`."""
    return "local E = {}\n" + "".join(f"E.{c.name} = {int(c)}\n" for c in ErrorCode)


GENERATED_INCLUDES = {
    "keys.lua": lua_key_functions,
    "fields.lua": lua_field_names,
    "errors.lua": lua_error_codes,
}


class LuaLoadError(RuntimeError):
    pass


@dataclass(frozen=True)
class LuaScript:
    name: str
    shebang: str  # "#!lua flags=..." line, as written
    body: str  # expanded source without the shebang
    header: str

    # Cached: the backend asks for the flags, idempotence and sha on every call, and hashing
    # 27 KB of expanded source then cost about 40 us a call.
    @cached_property
    def flags(self) -> tuple[str, ...]:
        m = re.search(r"flags=([\w,-]+)", self.shebang)
        return tuple(m.group(1).split(",")) if m else ()

    @cached_property
    def idempotent(self) -> bool:
        """Safe to run twice (read-only, or its header says ``Idempotent: yes``): the backend
        resends it once when the connection was lost and the outcome is unknown."""
        said = re.search(r"^Idempotent: yes", self.header, re.M) is not None
        return "no-writes" in self.flags or said

    def source(self, with_shebang: bool) -> str:
        return f"{self.shebang}\n{self.body}" if with_shebang else self.body

    @cached_property
    def _shas(self) -> tuple[str, str]:
        """Both digests, once: every call of the script sends one (EVALSHA)."""
        return tuple(hashlib.sha1(self.source(w).encode()).hexdigest() for w in (False, True))  # type: ignore[return-value]

    def sha(self, with_shebang: bool) -> str:
        return self._shas[1 if with_shebang else 0]


def lua_dir() -> Path:
    """Installed wheels carry ``mooncake_redis/lua``; a source checkout has ``lua/`` at the top."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "lua", here.parent / "lua"):
        if (candidate / "includes").is_dir():
            return candidate
    raise LuaLoadError(f"no lua/ directory next to {here}")


def expand(
    text: str, include_dir: Path, stack: tuple[str, ...] = (), seen: set[str] | None = None
) -> str:
    seen = set() if seen is None else seen
    out: list[str] = []
    for line in text.splitlines():
        m = INCLUDE_RE.match(line.strip())
        if not m:
            out.append(line)
            continue
        name = m.group(1)
        if name in stack:
            raise LuaLoadError(f"include cycle: {' -> '.join((*stack, name))}")
        if name in seen:
            continue  # already expanded earlier in this script: its definitions are in scope
        seen.add(name)
        if name in GENERATED_INCLUDES:
            inc = GENERATED_INCLUDES[name]()
        else:
            path = include_dir / name
            if not path.is_file():
                raise LuaLoadError(f"missing include {name} (from {' -> '.join(stack) or 'top'})")
            inc = path.read_text()
        out.append(f"-- >>> {name}")
        out.append(expand(inc, include_dir, (*stack, name), seen))
        out.append(f"-- <<< {name}")
    return "\n".join(out)


def parse(name: str, text: str, include_dir: Path) -> LuaScript:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!lua"):
        raise LuaLoadError(f"{name}: first line must be a '#!lua' shebang")
    header_lines = []
    for line in lines[1:]:
        if not line.startswith("--"):
            break
        header_lines.append(line[2:].strip())
    header = "\n".join(header_lines)
    for section in ("KEYS", "ARGV", "Returns"):
        if section not in header:
            raise LuaLoadError(f"{name}: header lacks a {section} section")
    body = strip_comment_lines(expand("\n".join(lines[1:]), include_dir, (name,)))
    return LuaScript(name=name, shebang=lines[0].strip(), body=drop_unused(body), header=header)


def strip_comment_lines(source: str) -> str:
    """The source without its full-line comments and blank lines. Redis keeps the source of
    every loaded script in its own memory (INFO ``used_memory_scripts_eval``, counted against
    ``maxmemory``), once per script with all its includes: the comments were about half of it.
    Only whole lines go (the scripts hold no ``[[`` long strings a ``--`` line could be in)."""
    return "\n".join(
        line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("--")
    )


# A top-level helper: ``local function name(`` at column 0, its body indented and closed by
# ``end`` at column 0 (or the whole of it on that line, the next line not indented); or one of
# keys.lua's one-line ``function K.name(...) ... end``; or a one-line constant of errors.lua
# (``E.NAME = -705``) or fields.lua (``F.group = { ... }``): tables built on every call too.
_LOCAL_FN = re.compile(r"local function ([A-Za-z_]\w*)\(")
_KEY_FN = re.compile(r"function K\.([A-Za-z_]\w*)\(.*\bend$")
_CONST = re.compile(r"(E\.[A-Z_][A-Z0-9_]*) = -?\d+$|(F\.[a-z_]+) = \{.*\}$")
_NAME = re.compile(r"\b[KEF]\.[A-Za-z_]\w*|\b[A-Za-z_]\w*")


@cache
def _names(text: str) -> Counter[str]:
    """The names a helper's text holds, counted (every script repeats its includes' helpers)."""
    return Counter(_NAME.findall(text))


def drop_unused(source: str) -> str:
    """The source without the include helpers it never calls. A script runs its whole chunk on
    every call, so each helper an include defines is a closure made per call (about 25 us a
    call for ``exist``'s 72 unused ones, measured on Redis 7.0), and Redis keeps the source of
    every loaded script in its memory. A helper goes when its name appears nowhere outside its
    own definition and the helpers already gone, until none does (dropping one may leave
    another unused). Only definitions in the shape above are considered; a body line at column
    0 inside one is an error here, not a cut in the wrong place. Names are counted once per
    helper: every process loads 54 scripts at start (a CLI command's start-up time)."""
    lines = source.split("\n")
    blocks: list[tuple[str, int, int]] = []
    i = 0
    while i < len(lines):
        key = _KEY_FN.match(lines[i])
        const = None if key else _CONST.match(lines[i])
        fn = None if key or const else _LOCAL_FN.match(lines[i])
        if key:
            blocks.append((f"K.{key.group(1)}", i, i))
        elif const:
            blocks.append((const.group(1) or const.group(2), i, i))
        elif (
            fn
            and lines[i].endswith(" end")
            and (i + 1 == len(lines) or lines[i + 1][:1] not in (" ", "\t"))
        ):  # a one-line helper
            blocks.append((fn.group(1), i, i))
        elif fn:
            j = i + 1
            while j < len(lines) and lines[j] != "end":
                if lines[j][:1] not in (" ", "\t"):
                    raise LuaLoadError(f"helper {fn.group(1)}: line {j + 1} not indented")
                j += 1
            if j == len(lines):
                raise LuaLoadError(f"helper {fn.group(1)} has no 'end' at column 0")
            blocks.append((fn.group(1), i, j))
            i = j
        i += 1
    used = Counter(_NAME.findall(source))
    names = [_names("\n".join(lines[a : b + 1])) for _, a, b in blocks]
    gone: set[int] = set()
    changed = True
    while changed:  # a name's count only falls as helpers go: what is unused stays so
        changed = False
        for k, (name, _a, _b) in enumerate(blocks):
            if k not in gone and used[name] == names[k][name]:
                gone.add(k)
                used.subtract(names[k])
                changed = True
    cut = {line for k in gone for line in range(blocks[k][1], blocks[k][2] + 1)}
    return "\n".join(line for n, line in enumerate(lines) if n not in cut)


@cache
def load_all(directory: str | None = None) -> dict[str, LuaScript]:
    base = Path(directory) if directory else lua_dir()
    scripts = {}
    for path in sorted(base.glob("*.lua")):
        scripts[path.stem] = parse(path.name, path.read_text(), base / "includes")
    if not scripts:
        raise LuaLoadError(f"no scripts in {base}")
    return scripts
