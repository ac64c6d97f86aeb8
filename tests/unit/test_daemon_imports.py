"""What the daemon keeps out of its memory: modules it would load for nothing."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


@pytest.mark.skipif(importlib.util.find_spec("trio") is None, reason="trio is not installed")
def test_the_daemon_never_loads_an_installed_trio() -> None:
    """httpcore2 imports trio whenever it is installed (3.5 MB); the daemon runs on asyncio."""
    probe = (
        "import sys\n"
        "from signin_broker.daemon.main import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import httpx2\n"
        "httpx2.AsyncClient()\n"
        "assert sys.modules['trio'] is None, sys.modules['trio']\n"
    )
    _passes(probe)


def test_reflection_loads_its_descriptors_only_when_called() -> None:
    """grpclib's reflection service needs descriptor_pb2 (0.8 MB); api/reflection.py defers it."""
    probe = (
        "import sys\n"
        "import signin_broker.daemon.app\n"
        "assert 'google.protobuf.descriptor_pb2' not in sys.modules\n"
        "assert 'grpclib.reflection.service' not in sys.modules\n"
    )
    _passes(probe)


def test_a_restored_daemon_loads_nothing_only_a_sign_in_or_a_rare_path_needs() -> None:
    """The daemon's modules and its OAuth stack (oauth_stack.py), all a daemon that restored
    its sessions loads, hold no authlib (oidc/parameters.py's few lines do its work), no
    joserfc nor cryptography's x509 (a sign-in's id_token loads them), not the page's HTML
    (pages.py, with html's entities), difflib (a misspelt variable) nor ctypes (the first
    burst's malloc_trim): 4.5 MB less resident, each measured (bench_memory.py)."""
    probe = (
        "import sys\n"
        "import signin_broker.daemon.app, signin_broker.daemon.oauth_stack\n"
        "unwanted = ('authlib', 'joserfc', 'cryptography.x509', 'signin_broker.daemon.web.pages',"
        " 'html', 'difflib', 'ctypes')\n"
        "loaded = [m for m in unwanted if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from signin_broker.oidc.id_tokens import published_keys\n"
        "published_keys({'keys': [{'kty': 'oct', 'k': 'c2VjcmV0'}, {'kty': 'EC', 'crv': 'P-256',"
        " 'x': 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',"
        " 'y': 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0'}]})\n"
        "assert 'joserfc' in sys.modules\n"
    )
    _passes(probe)


def _passes(probe: str) -> None:
    """Run the probe in a fresh interpreter: it asserts what that one has loaded."""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
