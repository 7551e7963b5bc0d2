"""coro_rpc framing (``coro_rpc_protocol.hpp``): 20-byte request headers, 16-byte response
headers, little-endian; responses are matched to requests by ``seq_num``, so any order is fine.

An RPC-level failure sets the response header's ``err_code`` to a ``coro_rpc::errc`` and the
body to a struct_pack string with the message (what the real master sends, measured: 11
``function_not_registered`` for an unknown function id, 4 ``invalid_rpc_arguments`` for a body
that does not decode). A bad magic byte, a protocol version above 0 or a serialize type other
than struct_pack makes the real server drop the connection without an answer; so do we.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from .codec import Codec
from .declare import STRING_T

MAGIC = 0x15
VERSION = 0
REQ_HEADER = struct.Struct("<BBBBIIII")
RESP_HEADER = struct.Struct("<BBBBIII")
REQ_HEADER_LEN = REQ_HEADER.size  # 20
RESP_HEADER_LEN = RESP_HEADER.size  # 16


class Errc(IntEnum):
    """``coro_rpc::errc``."""

    ok = 0
    io_error = 1
    not_connected = 2
    timed_out = 3
    invalid_rpc_arguments = 4
    address_in_used = 5
    bad_address = 6
    open_error = 7
    listen_error = 8
    operation_canceled = 9
    rpc_throw_exception = 10
    function_not_registered = 11
    protocol_error = 12
    unknown_protocol_version = 13
    message_too_large = 14
    server_has_ran = 15
    invalid_rpc_result = 16
    serial_number_conflict = 17


# The messages the real server sends with each error (measured).
ERRC_MESSAGES = {
    Errc.function_not_registered: "the rpc function not registered",
    Errc.invalid_rpc_arguments: "invalid rpc arg",
}

ERROR_BODY = Codec(STRING_T)  # std::string_view message


class RequestHeader(NamedTuple):
    magic: int
    version: int
    serialize_type: int
    msg_type: int
    seq_num: int
    function_id: int
    length: int
    attach_length: int


def parse_request_header(data: bytes | bytearray | memoryview, offset: int = 0) -> RequestHeader:
    return RequestHeader(*REQ_HEADER.unpack_from(data, offset))


def request(seq: int, fid: int, body: bytes = b"") -> bytes:
    """A request frame (used by tests and the benchmark's raw client)."""
    return REQ_HEADER.pack(MAGIC, VERSION, 0, 0, seq, fid, len(body), 0) + body


def response(seq: int, body: bytes, err: int = 0) -> bytes:
    return RESP_HEADER.pack(MAGIC, VERSION, err, 0, seq, len(body), 0) + body


def error_response(seq: int, errc: Errc, message: str | None = None) -> bytes:
    text = message if message is not None else ERRC_MESSAGES.get(errc, errc.name)
    return response(seq, ERROR_BODY.encode(text), int(errc))


class ResponseHeader(NamedTuple):
    magic: int
    version: int
    err_code: int
    msg_type: int
    seq_num: int
    length: int
    attach_length: int


def parse_response_header(data: bytes | bytearray | memoryview, offset: int = 0) -> ResponseHeader:
    return ResponseHeader(*RESP_HEADER.unpack_from(data, offset))
