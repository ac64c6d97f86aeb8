"""Serving the stub on a loopback socket from a background thread, and stopping it in time."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from .pauses import Pauses

START_TIMEOUT_SECONDS = 10.0
STOP_TIMEOUT_SECONDS = 5.0
LISTEN_BACKLOG = 128


@dataclass(frozen=True, slots=True)
class Address:
    """Where a started stub serves; kept through a "stopped" outage."""

    host: str
    port: int
    base_url: str
    issuer: str


@dataclass(frozen=True, slots=True)
class Tls:
    """A certificate chain and its private key, both PEM files, to serve https with."""

    certificate_file: str
    key_file: str


@dataclass(frozen=True, slots=True)
class Serving:
    server: uvicorn.Server
    thread: threading.Thread
    pauses: Pauses


def loopback_host(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"  # a name could resolve elsewhere; the address cannot
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise ValueError(f"the stub provider serves on loopback only, not on {host!r}")
    return str(address)


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(LISTEN_BACKLOG)
    except BaseException:
        listening.close()
        raise
    return listening


def serve(
    app: Any, listening: socket.socket, name: str, pauses: Pauses, tls: Tls | None = None
) -> Serving:
    """Serve an ASGI app on an already listening socket from a thread; closes it if that fails."""
    try:
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
            ssl_certfile=tls.certificate_file if tls else None,
            ssl_keyfile=tls.key_file if tls else None,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [listening]}, name=name, daemon=True
        )
        thread.start()
        wait_until_serving(server, thread)
    except BaseException:
        listening.close()
        raise
    return Serving(server, thread, pauses)


def halt(serving: Serving) -> None:
    """Stop a server and wait for its thread; waiting requests are let go first."""
    serving.pauses.release_all()
    serving.server.should_exit = True
    serving.thread.join(STOP_TIMEOUT_SECONDS)
    if serving.thread.is_alive():
        serving.server.force_exit = True
        serving.thread.join(STOP_TIMEOUT_SECONDS)


def wait_until_serving(server: uvicorn.Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the stub provider's web server failed to start")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the stub provider's web server did not start in time")
        time.sleep(0.005)
