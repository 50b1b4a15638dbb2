"""What the caching tests read and call with the official SDK clients (issue 22).

Test-only: `tests/interop/test_sdk_client.py` and `tests/interop/test_ts_sdk_clients.py` copy this
file into a baked project's `src/<package>/tools/`; generated projects never contain it. It uses the
public tool API only.

2026-07-28 server/utilities/caching: a client MAY consider a result fresh for its `ttlMs`, and
both official clients do, so a hint that promises more than the content keeps is a stale read.
`caching://changing` changes on every read and declares nothing: every read must reach the
server. `caching://declared` changes on every read too, yet declares a TTL (a lie on purpose):
the second read served from the client's cache proves the clients honour the hints, so the
first resource's two values are the server's doing, not a client that never caches.
`declare_tool` declares a tool after start-up: an unsealed registry's lists say they are
immediately stale, so the next tools/list, not a cached one, shows it.
"""

from __future__ import annotations

import itertools
from typing import Final

from . import registry

#: The TTL `caching://declared` claims: far longer than any test runs.
DECLARED_TTL_SECONDS: Final = 600

_changing_reads = itertools.count(1)
_declared_reads = itertools.count(1)


@registry.resource("caching://changing", mime_type="text/plain")
async def changing() -> str:
    """A resource that changes on every read, with the default hints (ttlMs 0, private)."""
    return f"read {next(_changing_reads)}"


@registry.resource(
    "caching://declared",
    mime_type="text/plain",
    cache_ttl_seconds=DECLARED_TTL_SECONDS,
    cache_scope="private",
)
async def declared() -> str:
    """Changes on every read too, but declares a TTL: a caching client reads it once."""
    return f"declared read {next(_declared_reads)}"


@registry.tool()
async def declare_tool(name: str) -> str:
    """Declare a tool called `name` now, after start-up (a list change)."""

    async def late() -> str:
        return f"{name} ran"

    registry.tool(name=name, description="Declared at runtime by declare_tool.")(late)
    return f"declared {name}"
