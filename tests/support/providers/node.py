"""panva's oidc-provider (npm) as a real provider: oidc_provider/provider.mjs under Node.

The package is pinned, with every dependency, by oidc_provider/package-lock.json and
installed once with `npm ci` into .cache/interop/ at the repository's root (reused by
later runs while the lock file is unchanged). Each start copies provider.mjs into its
folder, links the installed node_modules beside it, and writes its settings: the
client, a new RSA signing key, the access-token lifetime, the pause and break flags'
paths, whether it gives DPoP nonces, and a new token for its admin route.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import ClassVar

import httpx2
from joserfc.jwk import RSAKey

from support.providers import (
    CLIENT_ID,
    KIOSK_ID,
    PAUSE_FLAG,
    REDIRECT_URI,
    SERVICE_TOKEN_TTL,
    RealProvider,
)
from support.real import unavailable
from support.service_accounts import new_key

SOURCE = Path(__file__).parent / "oidc_provider"
CACHE = Path(__file__).parents[3] / ".cache" / "interop"
NPM_TIMEOUT_SECONDS = 300
MIN_NODE_MAJOR = 20
DPOP_CLIENT_ID = CLIENT_ID + "-dpop"  # registered with dpop_bound_access_tokens
BREAK_FLAG = "break-next-refresh"  # in the provider's folder: how to answer the next refresh


class NodeOidcProvider(RealProvider):
    name = "oidc-provider"
    version = json.loads((SOURCE / "package.json").read_text())["dependencies"]["oidc-provider"]
    credentials: ClassVar[dict[str, str]] = {"login": "alice", "password": "any"}
    declines: ClassVar[tuple[str, ...]] = ("abort",)  # the device confirmation's [ Abort ]
    # The acr values it offers: a sign-in gets the first asked for, else the first here.
    acr_values: ClassVar[tuple[str, str]] = ("urn:rig:pwd", "urn:rig:mfa")
    # A refresh token only for offline_access (OIDC Core 11), which needs prompt=consent.
    # DPoP is offered to every client here; on the defaults the shared checks' tokens
    # stay Bearer, and DPOP_CLIENT_ID, which must prove, gets bound ones.
    daemon_settings: ClassVar[dict[str, str]] = {"scopes": "offline_access"}

    def __init__(
        self,
        folder: Path,
        access_token_ttl: int,
        *,
        dpop_nonces: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(folder, access_token_ttl)
        self.kiosk_key, self.kiosk_jwks = new_key()  # `KIOSK_ID-jwt` signs with it
        self.dpop_nonces = dpop_nonces  # False: no DPoP nonces, a proof's iat alone is checked
        self.env = env or {}  # more environment for Node (a faked clock, say)

    def break_next_refresh(self, how: str) -> None:
        """Answer the next refresh as `how` says: not_json, html, trickle:SECONDS, stall.

        See provider.mjs: all but html are the provider's own answer, after it acted.
        """
        (self.folder / BREAK_FLAG).write_text(how)

    def broken(self) -> list[str]:
        """The broken answers given so far, in order."""
        self.sync()
        return [r["how"] for r in self.records() if r.get("event") == "broken"]

    def refresh_statuses(self) -> list[int]:
        """The HTTP status of every refresh grant so far, in order."""
        self.sync()
        return [r["status"] for r in self.token_requests("refresh_token")]

    def reuses(self) -> int:
        """Refresh tokens sent again after they were rotated: each ended its grant there."""
        self.sync()
        return sum(1 for r in self.token_requests("refresh_token") if r.get("reuse"))

    def sync(self) -> None:
        """Wait (bounded) until every line the provider printed so far has been read."""
        marker = secrets.token_hex(8)
        httpx2.get(f"{self.issuer}/admin/sync", params={"id": marker}, timeout=10)
        deadline = time.monotonic() + 10
        while not any(r.get("id") == marker for r in self.records()):
            assert time.monotonic() < deadline, f"{self.name} printed no sync line"
            time.sleep(0.02)

    @staticmethod
    def installed() -> Path:
        """The node_modules folder with the pinned oidc-provider; installs it the first time."""
        return npm_installed(SOURCE, "oidc-provider")

    def command(self) -> tuple[list[str], dict[str, str]]:
        modules = self.installed()
        shutil.copy(SOURCE / "provider.mjs", self.folder / "provider.mjs")
        (self.folder / "node_modules").symlink_to(modules)
        key = RSAKey.generate_key(2048, {"use": "sig", "alg": "RS256"})
        key.ensure_kid()
        settings = {
            "client_id": CLIENT_ID,
            "dpop_client_id": DPOP_CLIENT_ID,
            "dpop_nonce_secret": secrets.token_urlsafe(32),
            "redirect_uris": [REDIRECT_URI],
            "signing_key": dict(key.as_dict(private=True)),
            "cookie_key": secrets.token_urlsafe(32),
            "access_token_ttl": self.access_token_ttl,
            "pause_flag": str(self.folder / PAUSE_FLAG),
            "break_flag": str(self.folder / BREAK_FLAG),
            "dpop_nonces": self.dpop_nonces,
            "admin_token": secrets.token_urlsafe(32),
            "acr_values": list(self.acr_values),
            "kiosk_id": KIOSK_ID,
            "kiosk_secret": self.kiosk_secret,
            "kiosk_jwks": self.kiosk_jwks,
            "client_credentials_ttl": SERVICE_TOKEN_TTL,
        }
        path = self.folder / "settings.json"
        path.write_text(json.dumps(settings))
        path.chmod(0o600)
        return ["node", "provider.mjs", str(path)], {**os.environ, **self.env}

    @classmethod
    def revoke_user(cls, folder: Path, issuer: str, sub: str) -> None:
        """provider.mjs's admin route: every grant of the account, with its tokens."""
        token = json.loads((folder / "settings.json").read_text())["admin_token"]
        answer = httpx2.post(
            issuer + "/admin/revoke",
            data={"sub": sub},
            headers={"Authorization": f"Bearer {token}"},
            timeout=15,
        )
        assert answer.status_code == 200, f"the admin revoke answered {answer.status_code}"
        assert answer.json()["grants"] > 0, f"no grant of {sub}"

    def base_url(self) -> str:
        for record in self.records():
            if record.get("event") == "listening":
                return str(record["issuer"])
        raise LookupError("not listening yet")


def npm_installed(source: Path, name: str) -> Path:
    """The node_modules of the packages `source`'s package-lock.json pins; `npm ci` once.

    Installed into .cache/interop/NAME-<hash of the lock file>, reused by later runs and
    by every test process while the lock file is unchanged. Skips (fails in CI) without
    Node MIN_NODE_MAJOR or later and npm.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable(f"node and npm are needed for {name} (Debian: apt-get install nodejs npm)")
    assert node is not None and npm is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    major = int(re.match(r"v(\d+)", version.stdout).group(1))  # type: ignore[union-attr]
    if major < MIN_NODE_MAJOR:
        unavailable(f"{name} needs Node {MIN_NODE_MAJOR}+")
    lock = (source / "package-lock.json").read_bytes()
    target = CACHE / f"{name}-{hashlib.sha256(lock).hexdigest()[:16]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # one install at a time, then everyone reuses it
        if not target.exists():
            _npm_ci(npm, source, target)
    return target / "node_modules"


def _npm_ci(npm: str, source: Path, target: Path) -> None:
    """Install the locked packages into a scratch folder, then move it into place whole."""
    scratch = Path(tempfile.mkdtemp(prefix="npm-", dir=CACHE))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(source / name, scratch / name)
        done = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=scratch, capture_output=True, text=True, timeout=NPM_TIMEOUT_SECONDS,
        )  # fmt: skip
        if done.returncode != 0:
            unavailable(f"npm ci of {source.name} failed:\n{done.stderr[-2000:]}")
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
