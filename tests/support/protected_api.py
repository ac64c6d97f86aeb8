"""A loopback HTTP API that takes only bearer tokens the stub provider honours.

Like a resource server: 200 with the token's subject for a good token, 401 otherwise;
`refuse_all` or `refuse` (a set of tokens) make it refuse good ones too, as after a
revocation the broker has not seen yet. `seen` keeps each request's token.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from signin_broker.testing import StubProvider


class ProtectedApi:
    def __init__(self, stub: StubProvider) -> None:
        self.stub = stub
        self.seen: list[str] = []
        self.refuse: set[str] = set()
        self.refuse_all = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/me"

    def __enter__(self) -> ProtectedApi:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

            def _answer(self) -> None:
                _, _, token = self.headers.get("Authorization", "").partition("Bearer ")
                api.seen.append(token)
                info = api.stub.access_token_info(token)
                refused = api.refuse_all or token in api.refuse or info is None
                body = json.dumps({"error": "invalid_token"} if refused else info).encode()
                self.send_response(401 if refused else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler
