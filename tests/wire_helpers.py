"""A raw coro_rpc client for tests: frames requests with our codec, matches replies by seq."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mooncake_redis.wire.codec import Codec
from mooncake_redis.wire.declare import STRING_T
from mooncake_redis.wire.protocol import RESP_HEADER_LEN, parse_response_header, request
from mooncake_redis.wire.rpc_table import RPCS, function_id

ERROR_TEXT = Codec(STRING_T)


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.seq = 0
        self.replies: dict[int, asyncio.Future[tuple[int, bytes]]] = {}
        self.order: list[int] = []  # seqs in the order replies arrived
        self.closed = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1") -> RawClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def _read(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(RESP_HEADER_LEN)
                h = parse_response_header(head)
                body = await self.reader.readexactly(h.length + h.attach_length)
                self.order.append(h.seq_num)
                fut = self.replies.pop(h.seq_num, None)
                if fut is not None and not fut.done():
                    fut.set_result((h.err_code, body[: h.length]))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.closed.set()
            for fut in self.replies.values():
                fut.cancel()

    def send(self, fid: int, body: bytes = b"") -> asyncio.Future[tuple[int, bytes]]:
        """Writes one request now; the future resolves to (err_code, body)."""
        self.seq += 1
        fut: asyncio.Future[tuple[int, bytes]] = asyncio.get_running_loop().create_future()
        self.replies[self.seq] = fut
        self.writer.write(request(self.seq, fid, body))
        return fut

    def send_rpc(self, name: str, args: Any = None) -> asyncio.Future[tuple[int, bytes]]:
        rpc = RPCS[name]
        body = rpc.request.encode(args) if rpc.request is not None else b""
        return self.send(rpc.fid, body)

    async def call(self, name: str, args: Any = None) -> Any:
        """The decoded result; raises RpcError for a coro_rpc-level error."""
        err, body = await asyncio.wait_for(self.send_rpc(name, args), 30)
        if err:
            raise RpcError(err, ERROR_TEXT.decode(body))
        return RPCS[name].response.decode(body)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"coro_rpc error {code}: {message}")
        self.code = code
        self.message = message


__all__ = ["RawClient", "RpcError", "function_id"]
