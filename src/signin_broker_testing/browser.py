"""A scripted browser for the sign-in tests and cases: one hop at a time, cookies kept by hand.

httpx's cookie jar will not send a Secure cookie over http://, while real browsers
treat http://127.0.0.1 as a secure context and do. So this keeps cookies itself,
per host:port, honouring Max-Age=0 deletions, and never follows redirects on its own,
so that every Location can be inspected.
"""

from __future__ import annotations

import functools
import os
import ssl
import sys
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2

MAX_HOPS = 10


def _verifying() -> ssl.SSLContext:
    """httpx2's default context, made once per trust setting (each takes 30-50 ms of CPU)."""
    return _context_trusting(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _context_trusting(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    del cert_file, cert_dir  # the cache's key: httpx2 reads both from the environment
    return httpx2.create_ssl_context()


class Browser:
    """Visits URLs like a browser would, one request per call."""

    def __init__(self) -> None:
        self._http = httpx2.Client(follow_redirects=False, timeout=15, verify=_verifying())
        self.cookies: dict[str, dict[str, str]] = {}  # host:port -> name -> value
        self.history: list[httpx2.Response] = []

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, url: str, **kwargs: object) -> httpx2.Response:
        authority = urlsplit(url).netloc
        jar = self.cookies.setdefault(authority, {})
        headers = dict(kwargs.pop("headers", {}) or {})  # type: ignore[call-overload]
        if jar:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        response = self._http.request(method, url, headers=headers, **kwargs)  # type: ignore[arg-type]
        for header in response.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(header).items():
                if morsel["max-age"] == "0":
                    jar.pop(name, None)
                else:
                    jar[name] = morsel.value
        self.history.append(response)
        return response

    def get(self, url: str, **kwargs: object) -> httpx2.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: object) -> httpx2.Response:
        return self.request("POST", url, **kwargs)

    def follow(self, response: httpx2.Response, until: str | None = None) -> httpx2.Response:
        """Follow redirects from response, stopping before a URL starting with `until`."""
        for _ in range(MAX_HOPS):
            if response.status_code not in (301, 302, 303, 307, 308):
                return response
            target = urljoin(str(response.url), response.headers["location"])
            if until is not None and target.startswith(until):
                return response
            response = self.get(target)
        raise AssertionError("too many redirects")


def location(response: httpx2.Response) -> str:
    return response.headers["location"]


def query_of(url: str) -> dict[str, str]:
    """A URL's query parameters, one value each."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


def main(argv: list[str] | None = None) -> int:
    """`python -m signin_broker_testing.browser URL`: open URL and follow where it leads.

    A person's browser, for a stub that approves without asking: a command to give
    `signin-broker login` (SIGNIN_BROKER_BROWSER) where no person clicks.
    """
    (url,) = sys.argv[1:] if argv is None else argv
    with Browser() as browser:
        landed = browser.follow(browser.get(url))
    return 0 if landed.is_success else 1


if __name__ == "__main__":
    sys.exit(main())
