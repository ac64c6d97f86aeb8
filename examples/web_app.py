"""A web app on this device whose page gets its token from the broker, through the extension.

    python examples/web_app.py ISSUER [--port 8000]

Serves examples/web_app/ (a static page and its script) on http://127.0.0.1:PORT and a
small API, GET /api/me, that takes a bearer token and answers who it belongs to by
asking the provider's userinfo, as any resource server checks a token. Allow the
page's origin for the extension first:

    signin-broker install-browser --browser chromium
    signin-broker apps allow 'browser:chromium/cebidliipbcfhdfgddngepmjegpjahaj' \\
        --origin http://127.0.0.1:8000

then load the extension (src/signin_broker/extension/) unpacked and open the page.
"""

from __future__ import annotations

import argparse
import http.server
import json
import sys
from functools import partial
from pathlib import Path

import httpx2

PAGE = Path(__file__).parent / "web_app"


class WebApp(http.server.SimpleHTTPRequestHandler):
    """The page's files, and /api/me behind a bearer token."""

    userinfo = ""

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/api/me":
            super().do_GET()
            return
        authorization = self.headers.get("Authorization", "")
        if not authorization.startswith("Bearer "):
            self._json(401, {"error": "a bearer token is required"})
            return
        answer = httpx2.get(self.userinfo, headers={"Authorization": authorization})
        if answer.status_code != 200:
            self._json(401, {"error": f"the provider refused the token ({answer.status_code})"})
            return
        claims = answer.json()
        self._json(200, {"sub": claims.get("sub"), "name": claims.get("name", claims.get("sub"))})

    def _json(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        print(f"web app: {format % args}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("issuer", help="the identity provider's issuer URL")
    parser.add_argument("--port", type=int, default=8000, help="the loopback port (0: any free)")
    args = parser.parse_args()
    discovery = httpx2.get(args.issuer.rstrip("/") + "/.well-known/openid-configuration")
    WebApp.userinfo = discovery.json()["userinfo_endpoint"]
    handler = partial(WebApp, directory=str(PAGE))
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
        print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
