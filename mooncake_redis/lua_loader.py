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
    prelude: str = ""  # the part of body its includes make (helpers, constants, per-call state)
    own: str = ""  # the rest: the script's own code

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
        """Both digests of the EVAL form (the measuring tools' EVALSHA), once."""
        return tuple(hashlib.sha1(self.source(w).encode()).hexdigest() for w in (False, True))  # type: ignore[return-value]

    def sha(self, with_shebang: bool) -> str:
        return self._shas[1 if with_shebang else 0]

    @cached_property
    def function(self) -> tuple[str, str]:
        """(function name, library source): the script as a Redis function (:func:`library`)."""
        return library(self)


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
    rest = lines[1:]
    last = max((i for i, line in enumerate(rest) if INCLUDE_RE.match(line.strip())), default=-1)
    text = "\n".join([*rest[: last + 1], _OWN, *rest[last + 1 :]])
    body = drop_unused(strip_comment_lines(expand(text, include_dir, (name,))))
    prelude, found, own = body.partition(_OWN)
    if not found:
        raise LuaLoadError(f"{name}: no code after its includes")
    return LuaScript(
        name=name,
        shebang=lines[0].strip(),
        body=f"{prelude}\n{own}",
        header=header,
        prelude=prelude,
        own=own,
    )


_OWN = "\n__MOONCAKE_REDIS_SCRIPT_OWN_CODE__\n"  # where a script's own code starts (never sent)


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


# -- scripts as Redis functions ---------------------------------------------------------------
# A statement of an include's top level: from a line at column 0 through the lines that
# continue it (indented, or closing it: ``end``, ``elseif``, ``else``, ``}``).
_CONTINUES = re.compile(r"[ \t]|end\b|elseif\b|else\b|\}")
_ONCE_LINE = re.compile(r"(function K\.|[EF]\.[A-Za-z_]\w* = )")
_BARE = re.compile(r"local (?!function\b)(?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*\s*(--.*)?$")
_DECLARED = re.compile(r"local ((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*=")
_TABLES = {"K", "F", "E"}  # the generated includes' tables: filled once, by _ONCE_LINE lines


def library(script: LuaScript) -> tuple[str, str]:
    """(function name, library source): ``script`` as a Redis function library.

    An EVAL script runs its whole chunk on every call, so every helper its includes define is
    a closure made on every call: 12-40 us of Redis CPU per call before the script's own first
    line (``tests/script_call_cost.py``). A library's chunk runs once, at ``FUNCTION LOAD``, and
    the function it registers runs the script's own code. So:

    - the include helpers (``local function``) and the generated K/F/E tables are made once,
      at load (where the library's code may not read ``string`` or any other global);
    - every other statement of an include's top level runs on the function's first call, in
      order, as the chunk ran it;
    - on every later call only its per-call state runs again (memo tables, the ARGV cursor, the
      caches of one call), in order, so no call sees another's state. The constants are
      spared: a statement that assigns only UPPER_CASE names (never written after, checked
      here), or whose first line ends with ``-- made once`` (the hex forms that depend on the
      runtime).

    KEYS and ARGV are the library's locals, set by each call. The name carries a digest of the
    source, so two versions of mooncake-redis share a Redis without replacing each other's
    functions.
    """
    once: list[str] = ["local KEYS, ARGV"]
    statements: list[tuple[list[str], bool]] = []  # (lines, runs on every call)
    # A script made without the loader (tests' own) is all its own code.
    prelude, own = (script.prelude, script.own) if script.own else ("", script.body)
    lines = prelude.split("\n") if prelude else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _ONCE_LINE.match(line):  # generated one-liners: K's functions, F's and E's values
            once.append(line)
            i += 1
            continue
        if _LOCAL_FN.match(line):  # a helper: through its 'end' (the shapes of drop_unused)
            j = i
            if not line.endswith(" end") or (i + 1 < len(lines) and lines[i + 1][:1] in " \t"):
                while lines[j] != "end":
                    j += 1
            once.extend(lines[i : j + 1])
            i = j + 1
            continue
        if _BARE.match(line):  # a declaration without a value: the library's, nil until set
            once.append(line)
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] and _CONTINUES.match(lines[j]):
            j += 1
        stmt = lines[i:j]
        declared = _DECLARED.match(line)
        names = [n.strip() for n in declared.group(1).split(",")] if declared else []
        if names and set(names) <= _TABLES:
            once.extend(stmt)
        else:
            if names:  # declared here, so the helpers below see it; assigned in the calls
                once.append("local " + ", ".join(names))
                stmt = [stmt[0][len("local ") :], *stmt[1:]]
            constant = (names and all(_CONSTANT.match(n) for n in names)) or stmt[0].endswith(
                _MADE_ONCE
            )
            statements.append((stmt, not constant))
        i = j
    _check_constants(script.name, statements, [*once, own])
    # The globals the code reads, as the library's locals set on the first call: a function's
    # global read goes through its environment's __index (about twice an EVAL script's cost,
    # and four times an upvalue's: docs/benchmarks.md).
    used = set(_NAME.findall("\n".join([*once, *(x for st, _ in statements for x in st), own])))
    lib_globals = [g for g in _LUA_GLOBALS if g in used]
    if lib_globals:
        once.insert(1, "local " + ", ".join(lib_globals))
        values = ", ".join(f"_G.{g}" for g in lib_globals)
        statements.insert(0, ([f"{', '.join(lib_globals)} = {values}"], False))
    state = _state_functions(once, statements)
    digest = hashlib.sha1("\n".join([*once, *state, own, script.shebang]).encode()).hexdigest()
    name = f"mooncake_redis_{script.name.removesuffix('.lua')}_{digest[:16]}"
    flags = ", ".join(f"'{f}'" for f in script.flags)
    source = "\n".join(
        [
            f"#!lua name={name}",
            "local __mooncake_redis_register = redis.register_function",
            *once,
            *state,
            "local function __mooncake_redis_main(keys, args)",
            "KEYS, ARGV = keys, args",
            "__mooncake_redis_call_state()",
            own,
            "end",
            f"__mooncake_redis_register{{function_name = '{name}',"
            f" callback = __mooncake_redis_main, flags = {{ {flags} }}}}",
        ]
    )
    return name, source


_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*$")
_LUA_GLOBALS = ("redis", "string", "table", "math", "tonumber", "tostring", "type", "pairs",
                "ipairs", "unpack", "select", "next", "error", "assert", "pcall", "cjson",
                "rawget", "setmetatable")  # fmt: skip
# A statement that makes a value no call changes (a function chosen by what the runtime has)
# says so at the end of its first line; any other runs on every call, the safe default.
_MADE_ONCE = "-- made once"
_UPVALUES = 50  # Lua 5.1 allows a function 60 upvalues (the library's locals it reads)


def _check_constants(name: str, statements: list[tuple[list[str], bool]], code: list[str]) -> None:
    """An UPPER_CASE value is made once per library: nothing may write into it."""
    constants = {
        n.strip()
        for stmt, each in statements
        if not each and (m := _DECLARED.match("local " + stmt[0]))
        for n in m.group(1).split(",")
        if _CONSTANT.match(n.strip())
    }
    text = "\n".join([*code, *(x for stmt, _ in statements for x in stmt)])
    for c in constants:
        write = rf"\b{c}\s*(\[[^\]]*\]|\.\w+)\s*=[^=]|table\.(insert|remove|sort)\({c}\b"
        if re.search(write, text):
            raise LuaLoadError(f"{name}: the constant {c} is written after it is made")


def _state_functions(once: list[str], statements: list[tuple[list[str], bool]]) -> list[str]:
    """``__mooncake_redis_call_state``: on the first call every statement, in order; on later
    calls those that run on every call. Each set in as many functions as keep each under Lua's
    limit of upvalues."""
    local = set()
    for line in once:
        if m := _LOCAL_FN.match(line):
            local.add(m.group(1))
        elif _BARE.match(line):
            local.update(_NAME.findall(line.split("--")[0][len("local ") :]))
        elif m := _DECLARED.match(line):
            local.update(n.strip() for n in m.group(1).split(","))

    def functions(prefix: str, stmts: list[list[str]]) -> tuple[list[str], str]:
        parts: list[list[str]] = [[]]
        seen: set[str] = set()
        for stmt in stmts:
            names = {n for line in stmt for n in _NAME.findall(line)} & local
            if parts[-1] and len(seen | names) > _UPVALUES:
                parts.append([])
                seen = set()
            parts[-1].extend(stmt)
            seen |= names
        out: list[str] = []
        for k, part in enumerate(parts, 1):
            out += [f"local function {prefix}_{k}()", *part, "end"]
        return out, " ".join(f"{prefix}_{k}()" for k in range(1, len(parts) + 1))

    first, first_calls = functions("__mooncake_redis_first", [st for st, _ in statements])
    each, each_calls = functions("__mooncake_redis_each", [st for st, e in statements if e])
    return [
        *first,
        *each,
        "local __mooncake_redis_ready = false",
        "local function __mooncake_redis_call_state()",
        f"  if __mooncake_redis_ready then {each_calls} return end",
        f"  {first_calls}",
        "  __mooncake_redis_ready = true",
        "end",
    ]
