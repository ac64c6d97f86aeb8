"""A loopback git server over HTTP for tests: `git http-backend` behind Basic auth.

The password must be an access token the stub provider issued and still honours, as a
forge that takes OAuth tokens checks them; a test can make it refuse one token (as a
server would after a revocation) to drive the helper's `erase`.
"""

from __future__ import annotations

import base64
import os
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from support.commands import BIN
from support.loopback_http import LoopbackServer, QuietHandler, TokenJudge, honoured

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"


class GitServer(LoopbackServer):
    """Serves the bare repositories under `root` at http://127.0.0.1:PORT/<name>.git."""

    def __init__(self, root: Path, stub: TokenJudge) -> None:
        self.root = root
        self.stub = stub
        self.seen: list[tuple[str, str]] = []  # (username, token) of each accepted request
        self.refuse: set[str] = set()  # tokens answered 401 although valid
        super().__init__(self._handler())
        self.url = self.origin

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                credentials = server.check(self.headers.get("Authorization", ""))
                if credentials is None:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                server.seen.append(credentials)
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(length),
                    "REMOTE_USER": credentials[0],
                    "PATH": "/usr/bin:/bin",
                }
                done = subprocess.run(
                    [HTTP_BACKEND], input=body, env=env, capture_output=True, timeout=60
                )
                head, _, content = done.stdout.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

        return Handler

    def check(self, authorization: str) -> tuple[str, str] | None:
        """The (username, token) of valid Basic credentials, else None."""
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            username, _, token = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            return None
        if token in self.refuse or not honoured(self.stub, token):
            return None
        return username, token


def bare_repository(root: Path, name: str) -> Path:
    """A bare repository with one commit (a README), under root."""
    work = root / f"{name}-work"
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    (work / "README").write_text("hello from the loopback forge\n")
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", "-C", str(work), "add", "README"], check=True)
    subprocess.run(["git", "-C", str(work), *identity, "commit", "-q", "-m", "first"], check=True)
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def git(
    folder: Path, socket_path: Path, server: GitServer, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run git with only this test's config: the broker's helper for the forge, no prompts."""
    config = folder / "gitconfig"
    config.write_text(
        f'[credential "{server.url}"]\n'
        f'\thelper = "signin-broker --socket {socket_path} --username someone"\n'
    )
    env = {
        "HOME": str(folder),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    return subprocess.run(
        ["git", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
