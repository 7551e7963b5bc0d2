"""The docs stay in step with the code: every endpoint in docs/http-api.md, the generated
configuration table in docs/operations.md."""

from __future__ import annotations

from pathlib import Path

from mooncake_redis.cli.options import ENV_OPTIONS, config_table
from mooncake_redis.server.schemas import RPCS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_endpoint_is_documented() -> None:
    text = (DOCS / "http-api.md").read_text()
    for rpc in RPCS.values():
        assert f"`POST {rpc.path}`" in text, rpc.name


def test_configuration_table_is_generated_from_config() -> None:
    text = (DOCS / "operations.md").read_text()
    assert config_table() in text, "regenerate with mooncake_redis.cli.options.config_table()"
    for var in ENV_OPTIONS.values():
        assert f"`{var}`" in text, var
