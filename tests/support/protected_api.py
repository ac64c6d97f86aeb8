"""A loopback HTTP API that takes only bearer tokens the stub provider honours.

Like a resource server: 200 with the token's subject for a good token, 401 otherwise;
`refuse_all` or `refuse` (a set of tokens) make it refuse good ones too, as after a
revocation the broker has not seen yet. `acr_values` (space-separated) makes it a
step-up API (RFC 9470): a token whose sign-in has none of them gets a 401 challenge
`insufficient_user_authentication` naming them. `seen` keeps each request's token,
`bodies` each POST's body (sent whole or in chunks).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from signin_broker_testing import StubProvider
from support.loopback_http import LoopbackServer, QuietHandler, honoured

STEP_UP = "insufficient_user_authentication"


class ProtectedApi(LoopbackServer):
    def __init__(self, stub: StubProvider) -> None:
        self.stub = stub
        self.seen: list[str] = []
        self.bodies: list[bytes] = []
        self.refuse: set[str] = set()
        self.refuse_all = False
        self.acr_values = ""
        super().__init__(self._handler())
        self.url = self.origin + "/me"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                api.bodies.append(self._body())
                self._answer()

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b""
                for _ in range(10_000):  # bounded: a test sends a few chunks
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    chunk = self.rfile.read(size + 2)[:size]  # and its CRLF
                    if not size:
                        break
                    body += chunk
                return body

            def _answer(self) -> None:
                _, _, token = self.headers.get("Authorization", "").partition("Bearer ")
                api.seen.append(token)
                refused = api.refuse_all or token in api.refuse or not honoured(api.stub, token)
                info = {"error": "invalid_token"} if refused else api.stub.access_token_info(token)
                weak = (
                    not refused
                    and api.acr_values
                    and (info or {}).get("acr") not in (api.acr_values.split())
                )
                if weak:
                    info = {"error": STEP_UP}
                body = json.dumps(info).encode()
                self.send_response(401 if refused or weak else 200)
                if weak:
                    self.send_header(
                        "WWW-Authenticate",
                        f'Bearer error="{STEP_UP}", error_description="A different'
                        f' authentication level is required", acr_values="{api.acr_values}"',
                    )
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
