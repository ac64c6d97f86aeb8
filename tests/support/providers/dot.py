"""django-oauth-toolkit (PyPI) as a real provider: the dot_project Django app under runserver.

Installed as dev extras at pinned versions (pyproject.toml). Each start gets a fresh
SQLite database in its folder, a new RSA key, one user and one public client with
skip_authorization, so the only page the browser sees is Django's login form, and a
public client for device sign-ins (its discovery names the device endpoint). The issuer
is DOT's default one, http://127.0.0.1:PORT/o, read from its discovery document.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import ClassVar, Self

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from support.providers import (
    CLIENT_ID,
    KIOSK_ID,
    PAUSE_FLAG,
    REDIRECT_URI,
    SERVICE_TOKEN_TTL,
    USER_EMAIL,
    RealProvider,
)
from support.real import unavailable

PINNED = {"django-oauth-toolkit": "3.4.1", "oauthlib": "3.3.1"}  # oauthlib 4.0.1: 500s
DEVICE_CLIENT_ID = CLIENT_ID + "-device"  # DOT's applications have one grant type each
PORT_TRIES = 3
REVOKE_TIMEOUT_SECONDS = 30
HERE = Path(__file__).parent  # on the provider's PYTHONPATH: dot_project is imported alone


class DjangoOAuthToolkit(RealProvider):
    name = "django-oauth-toolkit"
    version = PINNED["django-oauth-toolkit"]
    credentials: ClassVar[dict[str, str]] = {"username": "alice", "password": "alice-password-1"}
    # Device sign-ins go to an application of their own: a DOT application has one grant.
    daemon_settings: ClassVar[dict[str, str]] = {"device_client_id": DEVICE_CLIENT_ID}

    @staticmethod
    def check_installed() -> None:
        """Skip (or fail in CI) unless the pinned versions are installed."""
        for package, version in PINNED.items():
            try:
                found = metadata.version(package)
            except metadata.PackageNotFoundError:
                found = "none"
            if found != version:
                unavailable(
                    f"{package}=={version} is not installed (found {found}): pip install -e .[dev]"
                )

    def start(self) -> Self:
        """Start; again on another port if the free one was taken before runserver bound it."""
        for _ in range(PORT_TRIES - 1):
            try:
                super().start()
            except AssertionError:
                if "already in use" not in self.stderr():
                    raise
            else:
                return self
        super().start()
        return self

    def command(self) -> tuple[list[str], dict[str, str]]:
        self.port = _free_port()
        (self.folder / "db.sqlite3").unlink(missing_ok=True)  # a fresh one for every try
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        settings = {
            "folder": str(self.folder),
            "django_secret_key": secrets.token_urlsafe(32),
            "signing_key_pem": pem,
            "access_token_ttl": self.access_token_ttl,
            "client_id": CLIENT_ID,
            "device_client_id": DEVICE_CLIENT_ID,
            "device_verification_uri": f"http://127.0.0.1:{self.port}/o/device/",
            "redirect_uris": [REDIRECT_URI],
            "username": self.credentials["username"],
            "password": self.credentials["password"],
            "email": USER_EMAIL,
            "pause_flag": str(self.folder / PAUSE_FLAG),
            "kiosk_id": KIOSK_ID,
            "kiosk_secret": self.kiosk_secret,
            "client_credentials_ttl": SERVICE_TOKEN_TTL,
        }
        path = self.folder / "settings.json"
        path.write_text(json.dumps(settings))
        path.chmod(0o600)
        argv = [sys.executable, "-m", "dot_project.serve", str(path), str(self.port)]
        return argv, _env()

    @classmethod
    def revoke_user(cls, folder: Path, issuer: str, sub: str) -> None:
        """dot_project.revoke against the provider's database: DOT's own RefreshToken.revoke()."""
        del issuer  # the database is in the folder
        argv = [sys.executable, "-m", "dot_project.revoke", str(folder / "settings.json"), sub]
        done = subprocess.run(
            argv, env=_env(), capture_output=True, text=True, timeout=REVOKE_TIMEOUT_SECONDS
        )
        assert done.returncode == 0, f"dot_project.revoke failed:\n{done.stderr[-2000:]}"
        revoked = json.loads(done.stdout.splitlines()[-1])
        assert revoked["refresh_tokens"] + revoked["access_tokens"] > 0, f"no token of {sub}"

    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/o"


def _env() -> dict[str, str]:
    """The environment of the provider's processes: dot_project importable, output unbuffered."""
    return {**os.environ, "PYTHONPATH": str(HERE), "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    """A port free right now on 127.0.0.1 (runserver needs one named up front)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
