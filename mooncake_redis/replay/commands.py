"""Mounts ``replay`` and ``demo`` on the top-level CLI."""

from __future__ import annotations

from typing import Any

from .cli import add_demo_parser, add_replay_parser, run_demo, run_replay


def register(subparsers: Any) -> None:
    add_replay_parser(subparsers).set_defaults(func=run_replay)
    add_demo_parser(subparsers).set_defaults(func=run_demo)
