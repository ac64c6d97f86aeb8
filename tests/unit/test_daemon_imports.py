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
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_reflection_loads_its_descriptors_only_when_called() -> None:
    """grpclib's reflection service needs descriptor_pb2 (0.8 MB); api/reflection.py defers it."""
    probe = (
        "import sys\n"
        "import signin_broker.daemon.app\n"
        "assert 'google.protobuf.descriptor_pb2' not in sys.modules\n"
        "assert 'grpclib.reflection.service' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_the_oauth_stack_loads_no_authlib_and_joserfc_only_for_a_sign_in() -> None:
    """A restored daemon's providers and store (oauth_stack.py) hold neither: authlib's
    helpers are oidc/parameters.py's few lines, and joserfc (with cryptography's x509)
    loads at a sign-in's first id_token, 3.7 MB less in a daemon that never signs in."""
    probe = (
        "import sys\n"
        "import signin_broker.daemon.app, signin_broker.daemon.oauth_stack\n"
        "loaded = [m for m in ('authlib', 'joserfc', 'cryptography.x509') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from signin_broker.oidc.id_tokens import published_keys\n"
        "published_keys({'keys': [{'kty': 'oct', 'k': 'c2VjcmV0'}, {'kty': 'EC', 'crv': 'P-256',"
        " 'x': 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',"
        " 'y': 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0'}]})\n"
        "assert 'joserfc' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
