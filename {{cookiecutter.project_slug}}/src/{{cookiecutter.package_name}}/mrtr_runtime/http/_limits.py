"""Per-principal limits of the HTTP transport, sans-IO: how fast one principal may send, and how
many tool calls it may have running at once, so that one user (or one stolen token) cannot take
the server from everyone else. What is refused is answered 429 with Retry-After (RFC 6585
section 4) while other principals are served.

A request with no principal (no authentication: one user's own server) is never limited here;
the process-wide bounds (`MAX_IN_FLIGHT`, `MAX_WAITING`) still hold for it. Nothing here touches
a socket or a clock of its own: the app passes `now`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Final

__all__ = (
    "DEFAULT_CALLS_PER_PRINCIPAL",
    "DEFAULT_RATE_PER_PRINCIPAL",
    "MAX_TRACKED_PRINCIPALS",
    "PrincipalLimits",
)

#: Requests per second one principal may send, sustained; it may send twice that at once.
DEFAULT_RATE_PER_PRINCIPAL: Final = 50
#: Tool calls one principal may have running at once: a quarter of the process's 64 places.
DEFAULT_CALLS_PER_PRINCIPAL: Final = 16
#: Principals whose buckets are kept; past this the least recently seen is forgotten (its
#: bucket starts full again), so memory is bounded whatever number of principals arrives.
MAX_TRACKED_PRINCIPALS: Final = 65536


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class PrincipalLimits:
    """A token bucket per principal (`rate` a second, `2 * rate` at most saved up) and a count
    of its running tool calls (at most `calls`)."""

    def __init__(
        self,
        rate: int = DEFAULT_RATE_PER_PRINCIPAL,
        calls: int = DEFAULT_CALLS_PER_PRINCIPAL,
        *,
        max_tracked: int = MAX_TRACKED_PRINCIPALS,
    ) -> None:
        if rate < 1 or calls < 1 or max_tracked < 1:
            raise ValueError("rate, calls and max_tracked must be at least 1")
        self.rate = rate
        self.burst = 2 * rate
        self.calls = calls
        self.max_tracked = max_tracked
        self._buckets: collections.OrderedDict[str, _Bucket] = collections.OrderedDict()
        self._running: collections.Counter[str] = collections.Counter()

    def admit(self, principal: str | None, now: float) -> float | None:
        """Take one request from `principal`'s bucket: None when admitted, else the seconds
        until it may send again (the Retry-After)."""
        if principal is None:
            return None
        bucket = self._buckets.get(principal)
        if bucket is None:
            bucket = self._buckets[principal] = _Bucket(float(self.burst), now)
            if len(self._buckets) > self.max_tracked:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(principal)
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.rate

    def enter_call(self, principal: str | None) -> bool:
        """Count a tool call of `principal` as running (give it back with `leave_call`);
        False, counting nothing, when it already has `calls` running."""
        if principal is None:
            return True
        if self._running[principal] >= self.calls:
            return False
        self._running[principal] += 1
        return True

    def leave_call(self, principal: str | None) -> None:
        if principal is None:
            return
        self._running[principal] -= 1
        if self._running[principal] <= 0:
            del self._running[principal]

    def running(self, principal: str) -> int:
        return self._running[principal]
