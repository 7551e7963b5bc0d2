"""The input checks of the put RPCs (and upserts): keys, sizes, replicate configs.

Apart from ``puts.py`` because every batch key passes here first: the common case (an ASCII key
of no tenant scope, one positive size, RFC Design 4 prefixes) is checked inline, without a call
per key; anything else, and every refusal, takes the full path that names the error.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from .allocation import PutItem
from .context import Context
from .errors import ErrorCode, MooncakeError
from .models import ReplicaDescriptor, ReplicateConfig
from .prefix import HASH_LEN, SCOPE, check_key, check_str
from .records import U64_MAX

ConfigArg = ReplicateConfig | Mapping[str, Any] | None


class PutChecks:
    """Checks a put batch's inputs into :class:`PutItem` s (prefix, shard, put id, parent shard)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def check_put(self, i: int, key: Any, lengths: Any, cfg: ReplicateConfig, pid: str) -> PutItem:
        # The common case first (an ASCII key, one positive size): the same checks, fewer calls;
        # anything else (or a refusal) takes the full path below, which names the error.
        if (
            type(key) is str
            and 0 < len(key) <= self.ctx.config.max_key_length
            and key.isascii()
            and type(lengths) is list
            and len(lengths) == 1
            and type(lengths[0]) is int
            and 0 < lengths[0] <= U64_MAX
        ):
            prefix = self.ctx.prefix_of(key)
            parent = cfg.parent_block_hash
            if parent != prefix:
                shard_of = self.ctx.keys.shard_of
                pshard = shard_of(parent) if parent else -1
                return PutItem(i, key, lengths[0], prefix, shard_of(prefix), pid, cfg, pshard)
        k = check_key(key, self.ctx.config.max_key_length)
        if isinstance(lengths, int) and not isinstance(lengths, bool):
            lengths = [lengths]
        if not isinstance(lengths, (list, tuple)) or not lengths:
            raise MooncakeError(ErrorCode.INVALID_PARAMS, f"slice_lengths[{i}]: a non-empty list")
        for n in lengths:
            if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                raise MooncakeError(
                    ErrorCode.INVALID_PARAMS,
                    f"slice_lengths[{i}]: sizes must be positive, got {n!r}",
                )
        if sum(lengths) > U64_MAX:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"slice_lengths[{i}]: the sum exceeds 2^64 - 1 bytes"
            )
        prefix = self.ctx.prefix_of(k)
        if cfg.parent_block_hash == prefix:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"parent_block_hash: {prefix} is the key's own prefix"
            )
        shard_of = self.ctx.keys.shard_of
        parent = cfg.parent_block_hash
        pshard = shard_of(parent) if parent else -1
        return PutItem(i, k, sum(lengths), prefix, shard_of(prefix), pid, cfg, pshard)

    def check_config(self, cfg: ReplicateConfig) -> ReplicateConfig:
        n = cfg.replica_num
        p = cfg.parent_block_hash
        if (  # the common case: no preferred segment, an ASCII parent (or none)
            type(n) is int
            and 0 < n <= 64
            and not cfg.preferred_segment
            and not cfg.preferred_segments
            and type(p) is str
            and len(p) <= self.ctx.config.max_key_length
            and p.isascii()
        ):
            return cfg
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 64:
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, f"replica_num: must be in 1..64, got {n!r}"
            )
        for s in cfg.preferred():
            check_str("preferred_segments", s, 256)
        check_str(
            "parent_block_hash",
            cfg.parent_block_hash,
            self.ctx.config.max_key_length,
            allow_empty=True,
        )
        return cfg

    def check_batch(
        self,
        client_id: str,
        keys: Sequence[str],
        slice_lengths: Sequence[Sequence[int] | int],
        config: ConfigArg | Sequence[ConfigArg],
    ) -> tuple[str, list[PutItem], list[list[ReplicaDescriptor] | MooncakeError | None]]:
        """The input checks of a batch put (and upsert): the client id, the items that passed,
        and one result slot per key (a refused key's error already in it)."""
        client = check_str("client_id", client_id, self.ctx.config.max_key_length)
        if not isinstance(keys, (list, tuple)) or len(keys) != len(slice_lengths):
            raise MooncakeError(
                ErrorCode.INVALID_PARAMS, "keys, slice_lengths: lists of the same length"
            )
        limit = self.ctx.config.max_key_length
        if isinstance(config, (list, tuple)):
            if len(config) != len(keys):
                raise MooncakeError(ErrorCode.INVALID_PARAMS, "config: one per key")
            cfgs = list(config)
            for j, c in enumerate(cfgs):  # _check_config's common case inline, per key
                if type(c) is ReplicateConfig:
                    n, par = c.replica_num, c.parent_block_hash
                    if (
                        type(n) is int
                        and 0 < n <= 64
                        and not c.preferred_segment
                        and not c.preferred_segments
                        and type(par) is str
                        and len(par) <= limit
                        and par.isascii()
                    ):
                        continue
                cfgs[j] = self.check_config(ReplicateConfig.coerce(c))
        else:
            one = self.check_config(ReplicateConfig.coerce(config))  # type: ignore[arg-type]
            cfgs = [one] * len(keys)
        results: list[list[ReplicaDescriptor] | MooncakeError | None] = [None] * len(keys)
        items: list[PutItem] = []
        # Put ids: one random 64-bit base per batch, in base64url (11 bytes, fixed length),
        # then the key's index in hex (unique, never '|' nor ','): 12-15 bytes in every object
        # and allocation record, not 32 (schema 9; hex digits were 5 bytes more).
        base = secrets.token_urlsafe(8)
        # The common case inline (an ASCII key of no tenant scope, one positive size, RFC
        # Design 4 prefixes): _check_put's fast path without a call per key; the rest, and
        # every refusal, through _check_put (which names the error).
        plain = self.ctx.config.key_hash_pattern is None
        shard_of = self.ctx.keys.shard_of
        append = items.append
        for i, key in enumerate(keys):
            lengths = slice_lengths[i]
            cfg = cfgs[i]
            if (
                plain
                and type(key) is str
                and 0 < len(key) <= limit
                and key.isascii()
                and key[0] != SCOPE
                and type(lengths) is list
                and len(lengths) == 1
            ):
                size = lengths[0]
                if type(size) is int and 0 < size <= U64_MAX:
                    prefix = key[:HASH_LEN] if key.find("_") == HASH_LEN else key
                    parent = cfg.parent_block_hash
                    if parent != prefix:
                        append(
                            PutItem(
                                i, key, size, prefix, shard_of(prefix), f"{base}{i:x}", cfg,
                                shard_of(parent) if parent else -1,
                            )
                        )  # fmt: skip
                        continue
            try:
                append(self.check_put(i, key, lengths, cfg, f"{base}{i:x}"))
            except MooncakeError as exc:
                results[i] = exc
        # The later steps (put_end, exists, revoke) find these keys' shards in the memo.
        self.ctx.note_shards([(p.key, p.shard) for p in items])
        return client, items, results
