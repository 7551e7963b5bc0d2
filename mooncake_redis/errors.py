"""Mooncake's error codes, kept with their numbers so clients can match on them."""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    OK = 0
    INTERNAL_ERROR = -1
    BUFFER_OVERFLOW = -10
    SHARD_INDEX_OUT_OF_RANGE = -100
    SEGMENT_NOT_FOUND = -101
    SEGMENT_ALREADY_EXISTS = -102
    CLIENT_NOT_FOUND = -103
    NO_AVAILABLE_HANDLE = -200
    INVALID_VERSION = -300
    INVALID_KEY = -400
    WRITE_FAIL = -500
    INVALID_PARAMS = -600
    ILLEGAL_CLIENT = -601
    INVALID_WRITE = -700
    INVALID_READ = -701
    INVALID_REPLICA = -702
    REPLICA_IS_NOT_READY = -703
    OBJECT_NOT_FOUND = -704
    OBJECT_ALREADY_EXISTS = -705
    OBJECT_HAS_LEASE = -706
    LEASE_EXPIRED = -707
    OBJECT_HAS_REPLICATION_TASK = -708
    REPLICA_NOT_FOUND = -710
    REPLICA_ALREADY_EXISTS = -711
    TRANSFER_FAIL = -800
    RPC_FAIL = -900
    UNAVAILABLE_IN_CURRENT_STATUS = -1010
    UNAVAILABLE_IN_CURRENT_MODE = -1011


class MooncakeError(Exception):
    """The one exception type: every failure carries a Mooncake error code."""

    def __init__(self, code: ErrorCode | int, message: str = "") -> None:
        self.code = ErrorCode(code)
        self.message = message or self.code.name
        super().__init__(f"{self.code.name} ({int(self.code)}): {self.message}")

    def to_dict(self) -> dict[str, object]:
        return {"code": int(self.code), "name": self.code.name, "message": self.message}


def invalid(field: str, why: str, code: ErrorCode = ErrorCode.INVALID_PARAMS) -> MooncakeError:
    return MooncakeError(code, f"{field}: {why}")
