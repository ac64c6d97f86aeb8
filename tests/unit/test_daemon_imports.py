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
