"""How a background loop reports failures: one log line when it starts failing (or fails
differently), one when it works again, and a growing pause between tries meanwhile.

While Redis is down every tick of every loop fails the same way; a traceback per tick buries
the one line that matters. A Redis outage (the backend's RPC_FAIL, a connection or timeout
error) is logged as a warning without a traceback; anything else is unexpected and gets its
traceback once.
"""

from __future__ import annotations

import logging
import time

from .errors import ErrorCode, MooncakeError


def is_outage(exc: BaseException) -> bool:
    """Redis did not answer (as opposed to a bug or a refused request)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(exc, MooncakeError):
        return exc.code == ErrorCode.RPC_FAIL
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError)


def _summary(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, MooncakeError):
        return text  # carries its code: RPC_FAIL (-900): ...
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class FailureLog:
    """One per loop: ``delay = log.failed(exc)`` after a failed tick, ``log.ok()`` after a good
    one. The delay doubles from ``base_s`` up to ``cap_s``."""

    def __init__(self, logger: logging.Logger, what: str, base_s: float, cap_s: float = 5.0):
        self.logger = logger
        self.what = what
        self.base_s = base_s
        self.cap_s = max(cap_s, base_s)
        self.failures = 0
        self._since = 0.0
        self._kind = ""

    def failed(self, exc: BaseException) -> float:
        """Logs on a change of state; returns the pause before the next try."""
        outage = is_outage(exc)
        kind = "outage" if outage else f"{type(exc).__module__}.{type(exc).__qualname__}"
        if self.failures == 0:
            self._since = time.monotonic()
        if kind != self._kind:
            self._kind = kind
            if outage:
                self.logger.warning(
                    "%s: %s; retrying with backoff up to %.0f s, quiet until Redis answers",
                    self.what,
                    _summary(exc),
                    self.cap_s,
                )
            else:
                self.logger.error(
                    "%s failed; retrying with backoff up to %.0f s, quiet while it fails the "
                    "same way",
                    self.what,
                    self.cap_s,
                    exc_info=exc,
                )
        self.failures += 1
        return float(min(self.cap_s, self.base_s * 2 ** (self.failures - 1)))

    def ok(self) -> None:
        if self.failures:
            self.logger.warning(
                "%s: working again after %d failed tries in %.1f s",
                self.what,
                self.failures,
                time.monotonic() - self._since,
            )
        self.failures = 0
        self._kind = ""
