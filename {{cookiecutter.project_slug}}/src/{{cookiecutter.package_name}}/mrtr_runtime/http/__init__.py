"""The Streamable HTTP wing (2026-07-28, basic/transports/streamable-http): the ASGI app, its
sans-IO rules, and the uvicorn runner (the project's optional ``http`` extra).

Nothing here is imported when serving stdio: ``mrtr_runtime.server`` loads these names on first
use.

- ``_rules.py``: who may ask (Host, Origin, bearer tokens), headers against the body, statuses.
- ``_oauth.py``: the OAuth 2.1 resource server's rules (basic/authorization): Protected Resource
  Metadata, challenges, a JWT access token read into a grant (the ``oauth`` extra: PyJWT).
- ``_authorization_server.py``: the authorization server's metadata and keys, fetched and kept.
- ``_settings.py``: ``HttpSettings``, how it listens and what it bounds (MRTR_HTTP_*, MRTR_OAUTH_*).
- ``_responses.py``: what every answer is made of, in both eras.
- ``_app.py``: ``HttpApp``, the ASGI app over the same ``Server`` the stdio transport uses: the
  endpoint, health, OAuth, and 2026-07-28's stateless requests.
- ``_legacy_era.py``: 2025-11-25 on the same endpoint: sessions, their streams, the bridge.
- ``_sessions.py``: the 2025-11-25 session table and stream logs (sans-IO).
- ``_uvicorn.py``: ``serve_http``, bounded connections and heads, the stop at SIGTERM.
"""

from __future__ import annotations

from ._app import HttpApp
from ._settings import HttpSettings
from ._uvicorn import serve_http

__all__ = ("HttpApp", "HttpSettings", "serve_http")
