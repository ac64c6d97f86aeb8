"""A gRPC app in another language: grpc_js_app/app.mjs under Node, with @grpc/grpc-js.

The packages are pinned by grpc_js_app/package-lock.json and installed once with
`npm ci` into .cache/interop/ (support.providers.node.npm_installed). The app loads
the installed broker.proto (`signin-broker proto`), asks GetToken on the socket and
sends the token to a userinfo endpoint as Bearer, as apps in other languages do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from support.commands import signin_broker
from support.providers.node import npm_installed

SOURCE = Path(__file__).parent / "grpc_js_app"
RUN_TIMEOUT_SECONDS = 30


def ask_then_userinfo(socket_path: Path, userinfo_url: str) -> dict[str, Any]:
    """Run the app once: {"token_type", "status" (userinfo's), "sub"}, or {"error", ...}."""
    modules = npm_installed(SOURCE, "grpc-js-app")
    proto = signin_broker("proto").stdout.strip()
    with tempfile.TemporaryDirectory(prefix="grpc-js-") as folder:
        shutil.copy(SOURCE / "app.mjs", Path(folder) / "app.mjs")
        (Path(folder) / "node_modules").symlink_to(modules)
        done = subprocess.run(
            ["node", "app.mjs", proto, str(socket_path), userinfo_url],
            cwd=folder, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS,
            env=dict(os.environ),
        )  # fmt: skip
    assert done.stdout.strip(), f"the Node app printed nothing:\n{done.stderr[-2000:]}"
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer
