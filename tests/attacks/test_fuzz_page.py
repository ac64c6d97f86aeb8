"""The loopback sign-in page, fuzzed with arbitrary requests.

Every route (the begin endpoint, /user/login, the callback, /logout, / and /dashboard,
and paths that are none of them) gets arbitrary methods, query strings, headers,
cookies and bodies; the callback also gets a live state (from a sign-in begun for the
example) with an arbitrary or a real code. Whatever comes in, the page answers below
500, sends the browser nowhere but to itself or the provider, serves no page without
its Content-Security-Policy, reflects no markup, shows no secret, and the daemon keeps
serving without an error or a traceback in its log. A second test sends raw bytes that
are no HTTP request at all. Examples are bounded and derandomized.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode, urljoin, urlsplit

import httpx2
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location, query_of
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support.fuzzing import FUZZ, troubled_lines, weighted
from support.leaks import SecretIndex
from support.signin import BEGIN, CALLBACK, sign_in

COOKIE = "signin_broker_session"
MAX_REQUEST_HEAD = 16 * 1024  # the page's limit on a request line and headers
MAX_CLIENT_URL = 65_536  # httpx's limit on a URL
ROUTES = [BEGIN, "/user/login", CALLBACK, "/logout", "/", "/dashboard"]
PROBES = ["<script>alert(1)</script>", "\"'><svg onload=alert(1)>"]  # never shown raw
TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            *PROBES,
            "",
            "\x00",
            "access_denied",
            "invalid_scope",
            "7",
            "99999999999999999999",
            "/dashboard?tab=apps",
            "//evil.example/",
            "http://evil.example/",
            "/\\evil.example",
            "javascript:alert(1)",
            "/auth/oauth2/id-provider/callback",
            "%2e%2e%2f",
        ]
    ),
    st.builds(
        lambda piece, times: piece * times, st.text(min_size=1, max_size=2), st.integers(500, 3000)
    ),
)
KEYS = st.one_of(
    st.sampled_from(
        [
            "code",
            "state",
            "error",
            "error_description",
            "redirect_to",
            "sign_in",
            "workspace_id",
            "iss",
        ]
    ),
    st.text(max_size=10),
)
LATIN1 = st.text(  # what a header value can carry (no edge whitespace: the client refuses it)
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=60
).map(lambda value: value.strip(" \t"))
HEADER_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,20}", fullmatch=True).filter(
    lambda name: (
        name.lower() not in {"host", "content-length", "transfer-encoding", "cookie", "connection"}
    )
)


@dataclass(frozen=True)
class PageRequest:
    """One request as the fuzzer drew it; `state` and `code` say where those came from."""

    method: str
    path: str
    query: list[tuple[str, str]]
    raw_query: str | None
    host: str | None  # None: the page's own authority
    headers: list[tuple[str, str]]
    cookie: str | None  # "real": the browser's live session cookie
    body: bytes
    state: str  # "none", "random" or "pending" (a sign-in begun for this example)
    code: str  # "random" or "real" (the provider's answer to that sign-in)


REQUESTS = st.builds(
    PageRequest,
    method=weighted(  # mostly what a browser sends, so requests reach the handlers
        (6, st.just("GET")),
        (2, st.just("POST")),
        (1, st.sampled_from(["HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"])),
        (1, st.from_regex(r"[A-Z]{1,10}", fullmatch=True)),
    ),
    path=weighted(
        (5, st.sampled_from(ROUTES)),
        (3, st.just(CALLBACK)),  # the route with the most to get wrong
        (
            1,
            st.sampled_from(["//", "/dashboard/", "/%2e%2e/etc/passwd", "/logout/..", BEGIN + "/"]),
        ),
        (
            1,
            st.text(
                st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="?#%"),
                max_size=30,
            ).map(lambda text: "/" + text),
        ),
    ),
    query=st.lists(st.tuples(KEYS, TEXT), max_size=6),
    raw_query=st.none()
    | st.from_regex(r"[!-~]{0,80}", fullmatch=True).map(lambda q: q.replace("#", "")),
    host=weighted(  # mostly the page's own authority, so requests get past the door
        (6, st.none()),
        (
            1,
            st.sampled_from(
                ["localhost", "evil.example", "127.0.0.1", "", "127.0.0.1:1", "LOCALHOST:80"]
            ),
        ),
    ),
    headers=st.lists(
        st.one_of(
            st.tuples(
                st.sampled_from(["Origin", "Sec-Fetch-Site", "Referer", "Content-Type"]), LATIN1
            ),
            st.tuples(st.just("Origin"), st.sampled_from(["null", "http://evil.example"])),
            st.tuples(
                st.just("Sec-Fetch-Site"), st.sampled_from(["same-origin", "cross-site", "none"])
            ),
            st.tuples(HEADER_NAMES, LATIN1),
        ),
        max_size=5,
    ),
    cookie=st.none() | st.just("real") | LATIN1,
    body=st.one_of(
        st.binary(max_size=300),
        st.lists(st.tuples(KEYS, TEXT), max_size=4).map(lambda pairs: urlencode(pairs).encode()),
    ),
    state=st.sampled_from(["none", "random", "pending", "pending"]),
    code=st.sampled_from(["random", "real"]),
)


@dataclass
class Page:
    """The daemon under fuzz, its stub, and the live session cookie of its browser."""

    daemon: DaemonProcess
    stub: StubProvider
    cookie: str

    @property
    def authority(self) -> str:
        return urlsplit(self.daemon.web_url).netloc


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    folder = short_temp_dir()
    with (
        StubProvider() as stub,
        DaemonProcess(folder / "run" / "broker.sock", "--issuer", stub.issuer) as daemon,
    ):
        with Browser() as browser:
            sign_in(browser, daemon)
            cookie = browser.cookies[urlsplit(daemon.web_url).netloc][COOKIE]
        yield Page(daemon, stub, cookie)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def untroubled(page: Page) -> Iterator[None]:
    """After the test: the page still answers, and the log has no error or traceback."""
    first = len(page.daemon.lines)
    yield
    assert page.daemon.alive, page.daemon.output()[-3000:]
    assert httpx2.get(page.daemon.web_url + "/", timeout=15).status_code == 200
    trouble = troubled_lines(page.daemon.lines[first:])
    assert not trouble, "\n".join(trouble[:5])


def _pending_sign_in(http: httpx2.Client, page: Page, real_code: bool) -> list[tuple[str, str]]:
    """Begin a sign-in; the state it waits for, and with real_code the provider's code too."""
    authorize = location(http.get(page.daemon.web_url + BEGIN))
    if not real_code:
        return [("state", query_of(authorize)["state"])]
    back = location(http.get(authorize))  # the stub approves at once
    assert back.startswith(page.daemon.web_url + CALLBACK), back
    return list(query_of(back).items())


def _url(page: Page, request: PageRequest, http: httpx2.Client) -> str:
    query = list(request.query)
    if request.path == CALLBACK and request.state != "none":
        if request.state == "pending":
            live = _pending_sign_in(http, page, request.code == "real")
            query = [pair for pair in query if pair[0] not in dict(live)] + live
        else:
            query.append(("state", "forged-state-" + str(len(query))))
    text = urlencode(query)
    if request.raw_query is not None:
        text = "&".join(filter(None, [text, request.raw_query]))
    return page.daemon.web_url + request.path + ("?" + text if text else "")


def _allowed_target(target: str, page: Page) -> bool:
    """Where the page may send a browser: itself (a path or its own URL) or the provider."""
    if target.startswith("/"):
        return not target.startswith(("//", "/\\"))
    parts = urlsplit(target)
    origin = f"{parts.scheme}://{parts.netloc}"
    return origin in (page.daemon.web_url, page.stub.base_url) and not parts.username


@pytest.mark.usefixtures("untroubled")
@settings(FUZZ, max_examples=150)
@given(request=REQUESTS)
def test_fuzz_the_sign_in_page_with_arbitrary_requests(page: Page, request: PageRequest) -> None:
    with httpx2.Client(follow_redirects=False, timeout=15) as http:
        url = _url(page, request, http)
        assume(len(url) < MAX_CLIENT_URL)  # longer ones the raw-bytes test sends
        headers = [
            ("Host", page.authority if request.host is None else request.host),
            *request.headers,
        ]
        cookie = page.cookie if request.cookie == "real" else request.cookie
        if cookie is not None:
            headers.append(("Cookie", f"{COOKIE}={cookie}"))
        raw_headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        try:
            response = http.request(request.method, url, headers=raw_headers, content=request.body)
        except httpx2.TransportError:
            # The page cuts off a request line or header block over its limit, and the
            # client may see the reset before the 400; any smaller request is answered.
            size = len(url) + sum(len(name) + len(value) for name, value in raw_headers)
            assert size > MAX_REQUEST_HEAD, (url[:300], raw_headers)
            event("cut off: too large")
            return
    event(f"{request.path if request.path in ROUTES else 'elsewhere'} -> {response.status_code}")
    assert response.status_code < 500, (url, response.status_code, response.text[:500])
    target = response.headers.get("location")
    if target is not None:
        assert _allowed_target(target, page), (url, target)
    if response.headers.get("content-type", "").startswith("text/html"):
        csp = response.headers.get("content-security-policy", "")
        assert "default-src 'none'" in csp, (url, dict(response.headers))
    assert not any(probe in response.text for probe in PROBES), (url, response.text[:2000])
    secrets = SecretIndex(SecretLedger.secrets())
    assert not secrets.found_in(response.text), (url, "a secret in the page")
    if request.path != "/logout":  # RP-initiated logout may hand the provider an id_token_hint
        assert not secrets.found_in(target or ""), (url, "a secret in the redirect")
    fresh = response.cookies.get(COOKIE)
    if fresh:  # a real code signed the browser in again: later examples use the new cookie
        page.cookie = fresh


@pytest.mark.usefixtures("untroubled")
@settings(FUZZ, max_examples=60)
@given(
    raw=st.one_of(
        st.binary(max_size=400),
        st.builds(
            lambda line, rest: line.encode("latin-1") + b"\r\n" + rest,
            st.from_regex(r"[A-Z]{1,7} /[!-~]{0,40} HTTP/1\.[01]", fullmatch=True),
            st.binary(max_size=300),
        ),
    )
)
def test_fuzz_the_sign_in_page_with_bytes_that_are_not_http(page: Page, raw: bytes) -> None:
    """Whatever the bytes, the answer (if any) is no 5xx and the server lives on."""
    host, port = urlsplit(page.daemon.web_url).netloc.rsplit(":", 1)
    answer = b""
    with socket.create_connection((host, int(port)), timeout=2.0) as connection:
        try:
            connection.sendall(raw)
            connection.shutdown(socket.SHUT_WR)
            for _ in range(64):  # until the page closes (bounded)
                chunk = connection.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # hung up on, or left waiting: both fine
    status_line = answer.split(b"\r\n", 1)[0]
    event(status_line[:12].decode("latin-1") or "no answer")
    assert not status_line.startswith(b"HTTP/1.1 5"), (raw, status_line)


def test_the_allowed_targets_are_this_page_and_the_provider_only(page: Page) -> None:
    """The redirect check of the fuzz test itself refuses what an open redirect would do."""
    base = page.daemon.web_url
    for good in [
        "/",
        "/dashboard?tab=apps",
        base + "/dashboard",
        page.stub.base_url + "/authorize?x=1",
    ]:
        assert _allowed_target(good, page), good
    for bad in [
        "//evil.example/",
        "/\\evil.example",
        "http://evil.example/",
        urljoin(base, "//evil"),
    ]:
        assert not _allowed_target(bad, page), bad
