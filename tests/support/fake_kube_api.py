"""A loopback fake of a Kubernetes API server for kubectl's exec-plugin tests.

HTTPS (kubectl sends an exec plugin's token only over TLS) with a certificate made
here for 127.0.0.1; any GET is answered 200 when its bearer token is one the stub
provider issued and still honours, and 401 otherwise, as an API server with OIDC or
webhook token authentication does.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from support.certificates import self_signed
from support.commands import BIN
from support.loopback_http import LoopbackServer, QuietHandler, TokenJudge, honoured


class FakeKubeApi(LoopbackServer):
    """Serves https://127.0.0.1:PORT; `tokens` holds each accepted request's token."""

    def __init__(self, folder: Path, stub: TokenJudge) -> None:
        self.stub = stub
        self.folder = folder  # its certificate, and a kubeconfig for it (kubectl_get)
        self.tokens: list[str] = []
        self.certificate = folder / "kube-api.pem"
        key_file = folder / "kube-api.key"
        self_signed(self.certificate, key_file)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificate, key_file)
        super().__init__(self._handler(), tls=context)
        self.url = self.origin

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                scheme, _, token = self.headers.get("Authorization", "").partition(" ")
                valid = scheme == "Bearer" and honoured(api.stub, token)
                if valid:
                    api.tokens.append(token)
                body = json.dumps(
                    {"kind": "Status", "status": "Success" if valid else "Failure"}
                ).encode()
                self.send_response(200 if valid else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def kubeconfig(path: Path, api: FakeKubeApi, command: list[str], exec_api_version: str) -> Path:
    """A kubeconfig whose one user gets its credential from `command` (an exec plugin)."""
    user: dict[str, object] = {
        "apiVersion": exec_api_version,
        "command": command[0],
        "args": command[1:],
    }
    if exec_api_version.endswith("/v1"):
        user["interactiveMode"] = "Never"  # required from v1 on
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "fake",
                "cluster": {"server": api.url, "certificate-authority": str(api.certificate)},
            }
        ],
        "users": [{"name": "broker", "user": {"exec": user}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "broker"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def kubectl_get(
    kubectl: str, api: FakeKubeApi, socket_path: Path, path: str, exec_api_version: str
) -> subprocess.CompletedProcess[str]:
    """`kubectl get --raw PATH` at the fake API, its credential from `signin-broker token`.

    The kubeconfig and kubectl's home are the API's folder; kubectl sees no other setting.
    """
    folder = api.folder
    plugin = [str(BIN / "signin-broker"), "--socket", str(socket_path), "token", "--format",
              "exec-credential"]  # fmt: skip
    config = kubeconfig(folder / "kubeconfig", api, plugin, exec_api_version)
    return subprocess.run(
        [kubectl, "get", "--raw", path],
        env={"KUBECONFIG": str(config), "HOME": str(folder), "PATH": os.environ["PATH"]},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
