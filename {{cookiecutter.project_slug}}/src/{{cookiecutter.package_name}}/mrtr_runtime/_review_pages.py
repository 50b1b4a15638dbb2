"""Review pages: what a question links to when its form cannot carry it (a long plan, the full
release notes), served read-only on loopback while a stdio server runs.

Hosts show only the first lines of a question (Claude Code: 3, each cut at the terminal's
width). client/elicitation's URL mode exists for what a form cannot carry: a tool asks
`elicit_url(message, url)` beside its yes/no form, the host shows the URL, and the user reads
the page before answering. `Context.page_for_review(text, title=...)` makes the page.

The pages are a capability: each URL holds an unguessable token (192 bits), and whoever has the
URL can read that page, nobody can list or change any. They live in memory, bounded
(`MAX_PAGES`, the oldest goes first; `MAX_PAGE_BYTES`; `PAGE_TTL_SECONDS`), and the listener
binds 127.0.0.1 only, on a port of the system's choosing, from the first page on (a server
whose tools make none opens no port). It answers only requests whose Host names it, so a web
page that rebinds a name of its own to 127.0.0.1 cannot read one. A page is text, escaped, in a
document that loads nothing and may not be framed. The listener is the standard library's
`http.server` in a daemon thread: a handful of GETs on loopback need nothing more, and the stdio
server carries no HTTP dependency (nor imports `http.server` before its first page).
"""

from __future__ import annotations

import html
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ._errors import MrtrError

__all__ = ("MAX_PAGES", "MAX_PAGE_BYTES", "PAGE_TTL_SECONDS", "ReviewPages")

#: Pages kept at once; the oldest goes first.
MAX_PAGES: Final = 64
#: A page's text, UTF-8: a long plan fits many times over; a runaway one is refused.
MAX_PAGE_BYTES: Final = 256 * 1024
#: How long a page can be read: longer than any question is open, shorter than a day.
PAGE_TTL_SECONDS: Final = 3600.0
_PATH: Final = "/review/"


class PageTooLarge(MrtrError, ValueError):
    """A review page's text is over MAX_PAGE_BYTES."""


@dataclass(frozen=True)
class _Page:
    title: str
    text: str
    expires: float


def render(title: str, text: str) -> bytes:
    """The page: the title and the text, escaped, monospaced, wrapped at the window's width."""
    escaped_title = html.escape(title)
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width">'
        f"<title>{escaped_title}</title>"
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60em;margin:2em auto;"
        "padding:0 1em}pre{white-space:pre-wrap;font:14px/1.5 ui-monospace,monospace}</style>"
        f"</head><body><h1>{escaped_title}</h1><pre>{html.escape(text)}</pre></body></html>\n"
    ).encode()


class ReviewPages:
    """The pages of one server, and the loopback listener that serves them (started by the
    first page). `clock` is for tests."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._pages: OrderedDict[str, _Page] = OrderedDict()
        self._lock = threading.Lock()
        self._listener: _Listener | None = None

    def publish(self, text: str, *, title: str) -> str:
        """A URL where `text` can be read for PAGE_TTL_SECONDS. Raises PageTooLarge."""
        if len(text.encode()) > MAX_PAGE_BYTES:
            raise PageTooLarge(
                f"a review page holds at most {MAX_PAGE_BYTES} bytes of text, "
                f"not {len(text.encode())}"
            )
        token = secrets.token_urlsafe(24)
        with self._lock:
            now = self._clock()
            for old in [key for key, page in self._pages.items() if page.expires <= now]:
                del self._pages[old]
            while len(self._pages) >= MAX_PAGES:
                self._pages.popitem(last=False)
            self._pages[token] = _Page(title, text, now + PAGE_TTL_SECONDS)
            if self._listener is None:
                self._listener = _Listener(self)
            origin = self._listener.origin
        return f"{origin}{_PATH}{token}"

    def read(self, token: str) -> bytes | None:
        """The page under `token` as HTML, or None: unknown, evicted or expired."""
        with self._lock:
            page = self._pages.get(token)
            if page is None or page.expires <= self._clock():
                return None
        return render(page.title, page.text)

    @property
    def origin(self) -> str | None:
        """`http://127.0.0.1:<port>` once a page was made; None before."""
        listener = self._listener
        return listener.origin if listener is not None else None

    def close(self) -> None:
        """Stop serving (the stdio server is stopping); pages are gone with the process."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._pages.clear()
        if listener is not None:
            listener.close()


class _Listener:
    """The loopback HTTP listener, in a daemon thread. `http.server` is imported here, by the
    first page: a stdio server whose tools make none never loads it (start-up stays fast)."""

    def __init__(self, pages: ReviewPages) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class LoopbackServer(ThreadingHTTPServer):
            daemon_threads = True

        port_holder: list[frozenset[str]] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            #: The request line and headers of a GET: a stalled client is cut off.
            timeout = 10

            def do_GET(self) -> None:
                self._answer(send_body=True)

            def do_HEAD(self) -> None:
                self._answer(send_body=False)

            def do_POST(self) -> None:
                self._send(405, b"Read only\n", "text/plain", send_body=True)

            do_PUT = do_DELETE = do_PATCH = do_POST

            def _answer(self, *, send_body: bool) -> None:
                if self.headers.get("Host", "") not in port_holder[0]:
                    # DNS rebinding: a page whose name now points at 127.0.0.1 sends its own Host.
                    self._send(421, b"Misdirected request\n", "text/plain", send_body)
                    return
                path, _, _ = self.path.partition("?")
                token = path[len(_PATH) :] if path.startswith(_PATH) else ""
                page = pages.read(token) if token else None
                if page is None:
                    gone = b"No such page (it may have expired)\n"
                    self._send(404, gone, "text/plain", send_body)
                    return
                self._send(200, page, "text/html; charset=utf-8", send_body)

            def _send(self, status: int, body: bytes, kind: str, send_body: bool) -> None:
                self.send_response(status)
                for name, value in _HEADERS:
                    self.send_header(name, value)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body:
                    self.wfile.write(body)

            def version_string(self) -> str:
                return "mrtr-review"  # not the Python version

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: stderr is the host's log, and a page's URL is its secret."""

        self.server = LoopbackServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        port_holder.append(frozenset({f"127.0.0.1:{port}", f"localhost:{port}"}))
        self.origin = f"http://127.0.0.1:{port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="mrtr-review-pages", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


_HEADERS: Final = (
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    ),
)
