"""The one root of what the runtime raises: `MrtrError`.

``except MrtrError`` catches every refusal, failure and misuse the runtime reports, whatever module
it comes from (a JSON-RPC error, a token that does not verify, a task store that cannot be
reached, a wing the project was generated without, a test client's broken session). Each also
keeps the builtin class it always had where code may catch that (`ValueError`, `LookupError`,
`RuntimeError`), so nothing that caught it before misses it now.

Two stand apart, on purpose: `StartTask`, a `BaseException` like asyncio's cancellation (it ends
the request's run where the call becomes a task, and no ``except Exception`` may swallow it), and
the errors of the two modules a project loads by path before it is installed (`cli/_hosts.py`,
`cli/_artifacts.py`: `ArtifactRefused`), which import nothing of the runtime.
"""

from __future__ import annotations

__all__ = ("MrtrError",)


class MrtrError(Exception):
    """Raised by the runtime (see the module for the two that are not)."""
