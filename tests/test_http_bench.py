"""The HTTP benchmarks' harness: a figure is never taken over failing calls."""

from __future__ import annotations

import pytest

from mooncake_redis import ErrorCode, MooncakeError
from mooncake_redis.bench.http_layer import route_section
from mooncake_redis.bench.workers import BATCH, BenchFailure, check_exists, check_puts


def test_checks_refuse_failed_or_empty_calls() -> None:
    check_exists([True] * BATCH)
    check_puts([["replica"]] * BATCH)
    err = MooncakeError(ErrorCode.NO_AVAILABLE_HANDLE)
    for found in ([True] * (BATCH - 1) + [False], [True] * (BATCH - 1) + [err], [True] * 3):
        with pytest.raises(BenchFailure):
            check_exists(found)
    for res in ([["r"]] * (BATCH - 1) + [err], [["r"]] * (BATCH - 1) + [[]], [["r"]]):
        with pytest.raises(BenchFailure):
            check_puts(res)


def test_route_section_measures_a_working_route() -> None:
    bare, route = route_section(50)
    assert bare["handler"] == "bare ASGI handler" and route["handler"] == "worker route"
    assert bare["cpu_ms_per_call"] > 0 and route["cpu_ms_per_call"] > 0
