"""Trace replay: drive a KV store the way SGLang HiCache does and measure what it keeps."""

from mooncake_redis.replay.driver import ReplayOptions, ReplayResult, replay
from mooncake_redis.replay.target import (
    PutItem,
    ReplayTarget,
    TargetOptions,
    available_targets,
    create_target,
    register_target,
)
from mooncake_redis.replay.trace import Block, TraceError, TraceRecord, load_trace

__all__ = [
    "Block",
    "PutItem",
    "ReplayOptions",
    "ReplayResult",
    "ReplayTarget",
    "TargetOptions",
    "TraceError",
    "TraceRecord",
    "available_targets",
    "create_target",
    "load_trace",
    "register_target",
    "replay",
]
