"""The Mooncake master's own wire protocol (coro_rpc + struct_pack), so the real, unchanged
``MooncakeDistributedStore`` client can use a worker as its master.

- ``structpack`` / ``declare`` / ``codec``: the struct_pack format, wire types from annotations,
  compiled per-type codecs; ``types``: every Mooncake type; ``rpc_table``: function ids and
  signatures; ``protocol``: coro_rpc framing;
- ``frontend``: each RPC as calls of the ``MasterService`` facade; ``parents``: the opt-in
  parent inference; ``ids``: UUID <-> string ids;
- ``server``: the asyncio listener (SO_REUSEPORT); ``listener``: its hook into ``serve``;
  ``metadata``: the transfer engine's HTTP metadata routes, kept in Redis.

docs/wire.md describes the mapping, the deliberate differences and the deployment.
"""
