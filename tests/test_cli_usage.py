"""What a new user types, right or wrong, through ``main([...])`` and the real entry point: bad
values are refused by the parser with the subcommand's usage and exit 2; a store that cannot be
reached or disagrees is one line with the Mooncake code, exit 2, never a traceback; options go
where users type them; one Redis URL variable; help texts without reST markup."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mooncake_redis import Config, MasterService
from mooncake_redis.cli import main
from tests.conftest import _cleanup
from tests.helpers import h
from tests.servers import free_port

TRACE = ["--trace", "conversation-500", "--limit", "3", "--no-progress"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout, stderr of one command; argparse's exit becomes its code."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


# -- bad values: refused by the parser, with the subcommand's usage ---------------------------

BAD = [
    (["replay", *TRACE, "--capacity-blocks", "0"], "replay", "--capacity-blocks"),
    (["replay", *TRACE, "--capacity-blocks", "-1"], "replay", "--capacity-blocks"),
    (["replay", *TRACE, "--value-size", "0"], "replay", "--value-size"),
    (["replay", *TRACE, "--key-format", "mha", "--tp", "0"], "replay", "--tp"),
    (["replay", *TRACE, "--scoring", "bogus"], "replay", "--scoring"),
    (["replay", *TRACE, "--engines", "-1"], "replay", "--engines"),
    (["replay", *TRACE, "--speedup", "-1"], "replay", "--speedup"),
    (["replay", *TRACE, "--lease-ttl-ms", "-5"], "replay", "--lease-ttl-ms"),
    (["replay", "--trace", "conversation-500", "--limit", "-3"], "replay", "--limit"),
    (["replay", *TRACE, "--batch-size", "0"], "replay", "--batch-size"),
    (["replay", *TRACE, "--key-format", "gqa"], "replay", "--key-format"),
    (["demo", "--capacities", "-5"], "demo", "--capacities"),
    (["demo", "--capacities", "60,x"], "demo", "--capacities"),
    (["demo", "--conversations", "0"], "demo", "--conversations"),
    (["serve", "--port", "99999"], "serve", "--port"),
    (["serve", "--fsck-interval", "-1"], "serve", "--fsck-interval"),
    (["serve", "--log-level", "loud"], "serve", "--log-level"),
    (["evictor", "--once", "--max-objects", "-3"], "evictor", "--max-objects"),
    (["evictor", "--policy", "bogus"], "evictor", "--policy"),
    (["fsck", "--grace-ms", "-5"], "fsck", "--grace-ms"),
    (["inspect", "tree", h("A"), "--depth", "-1"], "inspect tree", "--depth"),
    (["inspect", "stats", "--num-shards", "-1"], "inspect stats", "--num-shards"),
    (["bench", "--sections", "bogus"], "bench", "--sections"),
    (["bench-eviction", "--sizes", "0"], "bench-eviction", "--sizes"),
    (["chaos", "--duration", "0"], "chaos", "--duration"),
]


@pytest.mark.parametrize(("argv", "command", "option"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_values_are_usage_errors(
    argv: list[str], command: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    assert err.startswith(f"usage: mooncake-redis {command} "), err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"argument {option}" in errors[0], err
    assert "Traceback" not in err and out == ""


def test_scoring_error_names_the_known_policies(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(capsys, "replay", *TRACE, "--scoring", "bogus")
    assert "INVALID_PARAMS (-600)" in err and "lru, lru-freq" in err


def test_bad_value_from_the_environment_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOONCAKE_REDIS_PORT", "abc")
    code, _, err = run(capsys, "serve")
    assert code == 2 and "argument --port" in err and "Traceback" not in err


def test_entry_point_exit_codes_without_traceback() -> None:
    """The real program (python -m): a usage error and an unreachable store."""
    dead = f"redis://user:hunter2@127.0.0.1:{free_port()}"
    for argv, needle in (
        (["serve", "--port", "99999"], "a TCP port is 1-65535"),
        (["replay", *TRACE, "--redis-url", dead], "cannot reach Redis at redis://user:***@"),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "mooncake_redis.cli", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 2, p.stderr
        assert needle in p.stderr and "Traceback" not in p.stderr and "hunter2" not in p.stderr


# -- a store that cannot be reached, or disagrees: one line, exit 2 ---------------------------

UNREACHABLE = [
    ["serve", "--port", "0"],  # the port is replaced below
    ["replay", *TRACE],
    ["demo", "--conversations", "2"],
    ["bench", "--sections", "roundtrips"],
    ["chaos", "--duration", "1"],
    ["evictor", "--once"],
    ["fsck"],
    ["inspect", "stats"],
]


@pytest.mark.parametrize("argv", UNREACHABLE, ids=[a[0] for a in UNREACHABLE])
def test_unreachable_redis_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"redis://user:hunter2@127.0.0.1:{free_port()}"
    argv = [a if a != "0" else str(free_port()) for a in argv]
    code, _, err = run(capsys, *argv, "--redis-url", dead)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith(f"{argv[0]}:")]
    assert len(lines) == 1, err
    assert "cannot reach Redis at redis://user:***@127.0.0.1" in lines[0]
    assert "RPC_FAIL (-900)" in lines[0]
    assert "hunter2" not in err and "Traceback" not in err


@pytest.fixture
def recorded(backend_url: str) -> Iterator[tuple[str, str]]:
    """A namespace recorded with 8 shards (URL, namespace)."""
    ns = "u" + uuid.uuid4().hex[:10]

    async def create() -> None:
        cfg = Config(redis_url=backend_url, namespace=ns, num_shards=8, enable_radix_tree=True)
        svc = await MasterService.from_url(backend_url, cfg)
        await svc.aclose()

    asyncio.run(create())
    yield backend_url, ns
    _cleanup(backend_url, ns)


def _mismatch(capsys: pytest.CaptureFixture[str], url: str, ns: str, *argv: str) -> None:
    code, _, err = run(capsys, *argv, "--redis-url", url, "--namespace", ns, "--num-shards", "16")
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith(f"{argv[0]}:")]
    assert len(lines) == 1 and "INVALID_VERSION (-300)" in lines[0] and "num_shards=8" in lines[0]
    assert "Traceback" not in err


def test_shard_mismatch_is_one_line(
    recorded: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _mismatch(capsys, *recorded, "evictor", "--once")


@pytest.mark.parametrize("argv", [["fsck", "--json"], ["inspect", "stats", "--json"]])
def test_read_only_tools_take_the_recorded_settings(
    argv: list[str], recorded: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """fsck and inspect write nothing and read the namespace as it was recorded (8 shards),
    whatever --num-shards says."""
    url, ns = recorded
    code, out, err = run(capsys, *argv, "--redis-url", url, "--namespace", ns, "--num-shards", "16")
    assert code == 0, err
    doc = json.loads(out)
    assert "Traceback" not in err
    if argv[0] == "inspect":
        assert all(s["shard"] < 8 for s in doc["shards"]), doc["shards"]


def test_serve_shard_mismatch_is_one_line(
    real_backend_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a server (the embedded store of a worker lives in the worker's own process)."""
    ns = "u" + uuid.uuid4().hex[:10]

    async def create() -> None:
        cfg = Config(redis_url=real_backend_url, namespace=ns, num_shards=8)
        await (await MasterService.from_url(real_backend_url, cfg)).aclose()

    asyncio.run(create())
    try:
        _mismatch(capsys, real_backend_url, ns, "serve", "--port", str(free_port()))
    finally:
        _cleanup(real_backend_url, ns)


# -- options where users type them ------------------------------------------------------------


@pytest.fixture
def populated(backend_url: str) -> Iterator[tuple[str, str]]:
    ns = "o" + uuid.uuid4().hex[:10]

    async def go() -> None:
        cfg = Config(redis_url=backend_url, namespace=ns, num_shards=8, enable_radix_tree=True)
        async with await MasterService.from_url(backend_url, cfg) as svc:
            await svc.mount_segment({"id": "s0", "size": 1 << 16}, "cl")
            await svc.put_start("cl", h("A") + "_0_k", 100)
            await svc.put_end("cl", h("A") + "_0_k")

    asyncio.run(go())
    yield backend_url, ns
    _cleanup(backend_url, ns)


def test_options_before_or_after_the_subcommand(
    populated: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, ns = populated
    store = ["--namespace", ns, "--num-shards", "8"]
    docs = []
    for argv in (
        ["inspect", "stats", "--json", "--redis-url", url, *store],
        ["inspect", "--json", "stats", "--redis-url", url, *store],
        ["inspect", "--redis-url", url, *store, "stats", "--json"],
        ["--redis-url", url, "inspect", *store, "stats", "--json"],
    ):
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        doc = json.loads(out)
        docs.append((doc["namespace"], doc["totals"]["objects"]))
    assert docs == [(ns, 1)] * 4
    code, out, _ = run(capsys, "inspect", "key", h("A") + "_0_k", "--json", "--redis-url", url,
                       *store)  # fmt: skip
    assert code == 0 and json.loads(out)["exists"] is True


def test_unknown_option_shows_the_subcommands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "inspect", "stats", "--bogus")
    assert code == 2
    assert err.startswith("usage: mooncake-redis inspect stats ")
    assert "mooncake-redis inspect stats: error: unrecognized arguments: --bogus" in err


# -- one Redis URL variable -------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["replay", *TRACE], ["bench", "--sections", "roundtrips"], ["fsck"], ["demo"]],
    ids=["replay", "bench", "fsck", "demo"],
)
def test_every_command_reads_one_url_variable(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("MOONCAKE_REDIS_REDIS_URL", f"redis://127.0.0.1:{port}")
    code, _, err = run(capsys, *argv)
    assert code == 2 and f"cannot reach Redis at redis://127.0.0.1:{port}" in err
    assert "deprecated" not in err


def test_old_url_variable_still_works_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mooncake_redis.cli.common as common

    monkeypatch.delenv("MOONCAKE_REDIS_REDIS_URL", raising=False)
    port = free_port()
    monkeypatch.setenv("MOONCAKE_REDIS_URL", f"redis://127.0.0.1:{port}")
    for argv in (["replay", *TRACE], ["fsck"]):
        monkeypatch.setattr(common, "_warned", set())
        code, _, err = run(capsys, *argv)
        assert code == 2 and f"cannot reach Redis at redis://127.0.0.1:{port}" in err
        assert "MOONCAKE_REDIS_URL is deprecated: set MOONCAKE_REDIS_REDIS_URL" in err


def test_fsck_on_the_embedded_store_says_it_is_empty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import mooncake_redis.cli.common as common

    monkeypatch.setattr(common, "_warned", set())
    monkeypatch.delenv("MOONCAKE_REDIS_REDIS_URL", raising=False)
    monkeypatch.delenv("MOONCAKE_REDIS_URL", raising=False)
    _, _, err = run(capsys, "fsck", "--namespace", "e" + uuid.uuid4().hex[:8])
    assert "embedded store of this process, which starts empty" in err


# -- brackets survive rich --------------------------------------------------------------------


def test_brackets_in_messages_are_not_markup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "replay", "--trace", "[x]missing.jsonl", "--no-progress")
    assert code == 2 and "[x]missing.jsonl" in err
    assert len(err.splitlines()) == 1 and "bundled traces, by name: conversation-500" in err
    monkeypatch.setitem(sys.modules, "mooncake.store", None)  # the install hint
    code, _, err = run(capsys, "replay", *TRACE, "--target", "mooncake")
    assert code == 2 and "pip install 'mooncake-redis[mooncake]'" in err


def test_brackets_in_stored_keys_are_printed(
    backend_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = "b" + uuid.uuid4().hex[:10]
    key = h("A") + "_[red]x[/red]_k"

    async def go() -> None:
        cfg = Config(redis_url=backend_url, namespace=ns, num_shards=8, enable_radix_tree=True)
        async with await MasterService.from_url(backend_url, cfg) as svc:
            await svc.mount_segment({"id": "s[0]", "size": 1 << 16}, "cl[1]")
            await svc.put_start("cl[1]", key, 100)
            await svc.put_end("cl[1]", key)

    asyncio.run(go())
    try:
        store = ["--redis-url", backend_url, "--namespace", ns, "--num-shards", "8"]
        code, out, _ = run(capsys, "inspect", "key", key, *store)
        assert code == 0 and key in out.replace("\n", "") and "cl[1]" in out
        code, out, _ = run(capsys, "inspect", "node", h("A"), *store)
        assert code == 0 and key in out
        code, out, _ = run(capsys, "inspect", "stats", *store)
        assert code == 0 and "s[0]" in out
    finally:
        _cleanup(backend_url, ns)


# -- help -------------------------------------------------------------------------------------

COMMANDS = ["replay", "demo", "serve", "evictor", "inspect", "fsck", "bench", "bench-eviction",
            "chaos"]  # fmt: skip


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, _ = run(capsys, *argv, "--help")
    assert code == 0
    return out


def _options_without_help(text: str) -> list[str]:
    """Option lines of an argparse help text that carry no description (on the same line or,
    for a long option, indented on the next)."""
    lines = text.splitlines()
    missing = []
    for i, line in enumerate(lines):
        if not line.startswith("  -"):
            continue
        same_line = len(re.split(r"\s{2,}", line.strip(), maxsplit=1)) == 2
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not same_line and not (nxt.startswith(" " * 8) and not nxt.strip().startswith("-")):
            missing.append(line.strip())
    return missing


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_plain_and_complete(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, command)
    assert "``" not in text and ":func:" not in text and ":mod:" not in text, text
    description = text.split("\n\n")[1]
    assert not description.startswith(("options:", "positional")), f"{command}: no description"
    assert _options_without_help(text) == [], text


def test_serve_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help(capsys, "serve").split())
    for default in ("(default: 127.0.0.1)", "(default: 50051)", "(default: auto)",
                    "(default: 300)", "(default: 30)", "(default: info)"):  # fmt: skip
        assert default in text, default


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    for command in COMMANDS:
        assert command in text
