"""Review pages: the text a form's message cannot carry, linked from a URL-mode question.

Hosts show only the first lines of a question (Claude Code: 3). `Context.review_page` gives a
tool a URL-mode elicitation (client/elicitation, "URL mode") to a page holding the whole text,
served read-only on loopback while a stdio server runs. What must hold: the page is exactly the
text, escaped, in a document that loads nothing; only the URL's holder reads it (an unguessable
token, Host checked against DNS rebinding, nothing to list or change); pages are bounded in
number, size and time; a server that makes none opens no port and loads no HTTP code; a client
that cannot open URLs, or a server that serves no pages, gets no such question.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
from pydantic import BaseModel
from test_startup import request, run_server

from mrtr_runtime import Accepted, Context, InputRequired, MrtrError, Registry, elicit_form
from mrtr_runtime._review_pages import (
    MAX_PAGE_BYTES,
    MAX_PAGES,
    PAGE_TTL_SECONDS,
    PageTooLarge,
    ReviewPages,
)
from mrtr_runtime._tokens import new_signing_key_hex
from mrtr_runtime.testing import ClientSession, MemoryClient
from support import PACKAGE, Json, make_server

NOTES = "## demo 2.0.0\n\n### Highlights\n- <script>alert(1)</script> & more\n"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pages() -> Any:
    made = ReviewPages()
    yield made
    made.close()


def fetch(url: str, *, method: str = "GET", host: str | None = None) -> tuple[int, Any, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    headers = {"Host": host} if host is not None else {}
    try:
        connection.request(
            method, parts.path + (f"?{parts.query}" if parts.query else ""), headers=headers
        )
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


# -- the page --------------------------------------------------------------------------------------


def test_a_page_is_the_text_escaped_in_a_document_that_loads_nothing(pages: ReviewPages) -> None:
    assert pages.origin is None  # no page yet: no port
    url = pages.publish(NOTES, title="demo 2.0.0 <notes>")
    assert url.startswith("http://127.0.0.1:")
    assert pages.origin is not None and url.startswith(pages.origin + "/review/")
    assert len(url.rsplit("/", 1)[1]) == 32  # 24 random bytes, base64url

    status, headers, body = fetch(url)

    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    text = body.decode()
    assert "<title>demo 2.0.0 &lt;notes&gt;</title>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in text
    assert "<script>" not in text
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Server"] == "mrtr-review"  # no Python version for a scanner
    assert fetch(url, method="HEAD")[:2][0] == 200


@pytest.mark.parametrize("suffix", ["x", "", "../review", "?token", "%2e%2e/", "A" * 32])
def test_only_a_pages_own_url_reads_it(pages: ReviewPages, suffix: str) -> None:
    url = pages.publish(NOTES, title="t")
    origin = url.split("/review/")[0]
    assert fetch(f"{origin}/review/{suffix}")[0] == 404
    assert fetch(f"{origin}/")[0] == 404
    assert fetch(url + "x")[0] == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_pages_are_read_only(pages: ReviewPages, method: str) -> None:
    url = pages.publish(NOTES, title="t")
    assert fetch(url, method=method)[0] == 405
    assert fetch(url)[0] == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.2:1", ""])
def test_a_request_that_names_another_host_is_refused(pages: ReviewPages, host: str) -> None:
    # DNS rebinding: a web page whose own name now resolves to 127.0.0.1 sends that name.
    url = pages.publish(NOTES, title="t")
    status, _, body = fetch(url, host=host)
    assert status == 421
    assert b"review" not in body.lower() or b"Misdirected" in body
    port = urlsplit(url).port
    assert fetch(url, host=f"localhost:{port}")[0] == 200


# -- bounds ----------------------------------------------------------------------------------------


def test_pages_past_the_bound_push_out_the_oldest_at_ten_times_it() -> None:
    pages = ReviewPages()
    try:
        urls = [pages.publish(f"page {number}", title="t") for number in range(MAX_PAGES * 10)]
        tokens = [url.rsplit("/", 1)[1] for url in urls]
        kept = [token for token in tokens if pages.read(token) is not None]
        assert kept == tokens[-MAX_PAGES:]
        assert fetch(urls[0])[0] == 404 and fetch(urls[-1])[0] == 200
    finally:
        pages.close()


def test_a_page_lives_for_its_ttl_and_no_longer() -> None:
    clock = Clock()
    pages = ReviewPages(clock=clock)
    try:
        url = pages.publish(NOTES, title="t")
        clock.now += PAGE_TTL_SECONDS - 1
        assert fetch(url)[0] == 200
        clock.now += 1
        assert fetch(url)[0] == 404
        # Expired pages are dropped when the next one is made, not kept until evicted.
        pages.publish("next", title="t")
        assert len(pages._pages) == 1
    finally:
        pages.close()


def test_a_page_holds_at_most_its_byte_bound(pages: ReviewPages) -> None:
    assert pages.publish("é" * (MAX_PAGE_BYTES // 2), title="t")
    for size in (MAX_PAGE_BYTES + 1, MAX_PAGE_BYTES * 10):
        with pytest.raises(PageTooLarge, match=f"at most {MAX_PAGE_BYTES} bytes") as raised:
            pages.publish("x" * size, title="t")
        assert isinstance(raised.value, MrtrError) and isinstance(raised.value, ValueError)


def test_closing_stops_serving(pages: ReviewPages) -> None:
    url = pages.publish(NOTES, title="t")
    pages.close()
    with pytest.raises(OSError):
        fetch(url)


# -- Context.review_page ---------------------------------------------------------------------------


class Confirm(BaseModel):
    confirmed: bool


def reviewing_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def approve(*, ctx: Context) -> str | InputRequired:
        match ctx.form_answer("confirm", Confirm):
            case None:
                asks = {"confirm": elicit_form("Approve these notes?", Confirm)}
                review = ctx.review_page(NOTES, title="notes", message="The notes, in full")
                if review is not None:
                    asks = {"notes": review, **asks}
                return ctx.request_input(asks)
            case Accepted(content=Confirm(confirmed=True)):
                return "approved"
            case _:
                return "not approved"

    return registry


FORMS_AND_URLS: Json = {"elicitation": {"form": {}, "url": {}}}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("capabilities", "serving", "linked"),
    [
        (FORMS_AND_URLS, True, True),
        ({"elicitation": {"form": {}}}, True, False),  # the client cannot open URLs
        ({"elicitation": {}}, True, False),  # an empty elicitation is form only
        (FORMS_AND_URLS, False, False),  # this server serves no pages (HTTP, say)
    ],
)
async def test_a_review_question_is_asked_only_where_a_page_can_be_served_and_opened(
    capabilities: Json, serving: bool, linked: bool
) -> None:
    server = make_server(registry=reviewing_registry())
    if serving:
        server.review_pages = ReviewPages()
    try:
        client = MemoryClient(server, capabilities=capabilities)
        first = await client.request("tools/call", {"name": "approve"})
        asked = first["inputRequests"]
        assert list(asked) == (["notes", "confirm"] if linked else ["confirm"])
        if linked:
            params = asked["notes"]["params"]
            assert params == {"mode": "url", "message": "The notes, in full", "url": params["url"]}
            status, _, body = await anyio.to_thread.run_sync(fetch, params["url"])
            assert status == 200 and b"&lt;script&gt;" in body
        # The yes is the form's: the page's answer is only "opened" or not.
        done = await client.request(
            "tools/call",
            {
                "name": "approve",
                "inputResponses": {
                    "confirm": {"action": "accept", "content": {"confirmed": True}},
                    **({"notes": {"action": "decline"}} if linked else {}),
                },
                "requestState": first["requestState"],
            },
        )
        assert done["content"][0]["text"] == "approved"
    finally:
        if server.review_pages is not None:
            server.review_pages.close()


STDIO_SERVER = """\
import os, sys
from pydantic import BaseModel
from PACKAGE.mrtr_runtime import Accepted, Context, Registry, elicit_form
from PACKAGE.mrtr_runtime.server import Server, codec_from_environment, serve_stdio

class Confirm(BaseModel):
    confirmed: bool

registry = Registry()

@registry.tool()
async def approve(*, ctx: Context):
    match ctx.form_answer("confirm", Confirm):
        case None:
            asks = {"confirm": elicit_form("Approve these notes?", Confirm)}
            review = ctx.review_page(NOTES, title="notes", message="The notes, in full")
            return ctx.request_input({"notes": review, **asks} if review else asks)
        case Accepted(content=Confirm(confirmed=True)):
            return "approved"
        case _:
            return "not approved"

codec = codec_from_environment(os.environ, default_key_file=None)
sys.exit(serve_stdio(Server(name="review", version="0", registry=registry, signing=codec)))
""".replace("NOTES", repr(NOTES))


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_stdio_server_serves_its_pages_until_it_stops(tmp_path: Path, era: str) -> None:
    script = tmp_path / "serve.py"
    script.write_text(STDIO_SERVER.replace("PACKAGE", PACKAGE))
    seen: list[Json] = []

    async def elicit(params: Json) -> Json:
        seen.append(params)
        if params.get("mode") == "url":
            status, _, body = await anyio.to_thread.run_sync(fetch, params["url"])
            assert status == 200 and b"demo 2.0.0" in body
            return {"action": "accept"}
        return {"action": "accept", "content": {"confirmed": True}}

    env = {"MRTR_SIGNING_KEY": new_signing_key_hex()}
    with anyio.fail_after(30):
        async with ClientSession.spawn(
            [__import__("sys").executable, str(script)], env=env, era=era, elicitation=elicit
        ) as session:
            result = await session.call_tool("approve", {})
    assert result.text == "approved"
    # The bridge asks in the handler's order (the page first); the test client answers a
    # round's requests in key order.
    modes = [params.get("mode", "form") for params in seen]
    assert modes == (["url", "form"] if era == "legacy" else ["form", "url"])
    with pytest.raises(OSError):  # gone with the server
        fetch(next(params["url"] for params in seen if "url" in params))


def test_a_stdio_server_whose_tools_make_no_page_loads_no_http_server(tmp_path: Path) -> None:
    tools_source = (
        "import sys\nprint('http.server loaded:', 'http.server' in sys.modules, file=sys.stderr)\n"
    )
    responses, stderr, status = run_server(
        tmp_path, tools_source, request(1, "server/discover"), request(2, "tools/list")
    )
    assert status == 0, stderr
    assert [response["id"] for response in responses] == [1, 2]
    assert "http.server loaded: False" in stderr
    assert json.dumps(responses)  # answered, and nothing else on stdout
