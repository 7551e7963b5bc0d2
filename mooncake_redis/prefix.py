"""Prefix extraction (RFC Design 4) and input validation of keys and hashes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .errors import ErrorCode, MooncakeError

HASH_LEN = 64


@lru_cache(maxsize=16)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def extract_prefix(key: str, pattern: str | None = None) -> str:
    """The radix node a key belongs to.

    With ``pattern`` (one group), its first match names the block hash, for key formats that put
    a tag before the hash; otherwise, or when it does not match, RFC Design 4: if the first ``_``
    is at position 64 the first 64 characters are the prefix, else the whole key is.
    """
    if pattern is not None:
        m = _compiled(pattern).search(key)
        if m and m.group(1):
            return m.group(1)
    if key.find("_") == HASH_LEN:
        return key[:HASH_LEN]
    return key


SCOPE = "\0"  # a tenant's object key is SCOPE + tenant + SCOPE + key (tenants.py)


def split_scoped(key: str) -> tuple[str, str] | None:
    """(tenant, key) of a tenant-scoped key, None for any other key (a "default" key). Only
    a well-formed scoped key parses (a tenant id is printable ASCII without a leading ``_``,
    the key non-empty), so a default key is misread only if it is itself of that form."""
    if not key.startswith(SCOPE):
        return None
    j = key.find(SCOPE, 1)
    if j <= 1 or j + 1 >= len(key):
        return None
    tenant = key[1:j]
    if tenant[0] == "_" or not all(" " <= c <= "~" for c in tenant):
        return None
    return tenant, key[j + 1 :]


def check_str(field: str, value: object, max_len: int, *, allow_empty: bool = False) -> str:
    """A non-empty str of at most ``max_len`` characters that Redis can store as UTF-8."""
    if not isinstance(value, str):
        raise MooncakeError(
            ErrorCode.INVALID_PARAMS, f"{field}: expected a string, got {type(value).__name__}"
        )
    if not value and not allow_empty:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"{field}: must not be empty")
    if len(value) > max_len:
        raise MooncakeError(
            ErrorCode.INVALID_KEY if field.startswith("key") else ErrorCode.INVALID_PARAMS,
            f"{field}: {len(value)} characters, more than the maximum {max_len}",
        )
    if value.isascii():  # always valid UTF-8: no encoding (every key of a batch comes here)
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MooncakeError(ErrorCode.INVALID_PARAMS, f"{field}: not valid UTF-8") from exc
    return value


def check_key(value: object, max_len: int, field: str = "key") -> str:
    return check_str(field, value, max_len)


def check_keys(keys: Sequence[object], max_len: int) -> tuple[list[Any], list[str], list[int]]:
    """:func:`check_key` over a batch: (a result slot per key holding its input error, the valid
    keys, their indices). A batch of valid keys is checked as a whole (builtins over the batch:
    lengths, then UTF-8 once over the joined keys, a lone surrogate staying one in the join);
    any other goes key by key for its errors."""
    results: list[Any] = [None] * len(keys)
    if keys and set(map(type, keys)) == {str}:
        strs: Sequence[str] = keys  # type: ignore[assignment]
        lengths = list(map(len, strs))
        if min(lengths) > 0 and max(lengths) <= max_len:
            joined = "".join(strs)
            if joined.isascii():
                return results, list(strs), list(range(len(strs)))
            try:
                joined.encode("utf-8")
                return results, list(strs), list(range(len(strs)))
            except UnicodeEncodeError:
                pass
    items: list[str] = []
    where: list[int] = []
    for i, key in enumerate(keys):
        try:
            k = check_key(key, max_len)
        except MooncakeError as exc:
            results[i] = exc
            continue
        items.append(k)
        where.append(i)
    return results, items, where
