"""Assembles the daemon: gRPC server on the private socket, front listener, health, shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import cast

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from ..session.manager import SessionManager
from ..v1 import broker_pb2, broker_pb2_grpc
from .callers import CallerCheck, CallerRegistry, CheckedRegistration
from .front import FrontListener
from .instance import Instance
from .servicer import DaemonInfo, TokenBrokerServicer
from .settings import Settings

log = logging.getLogger(__name__)

SERVICE_NAME = broker_pb2.DESCRIPTOR.services_by_name["TokenBroker"].full_name
# Requests are a few hundred bytes; anything near this is an attack or a bug.
MAX_REQUEST_BYTES = 64 * 1024
SHUTDOWN_GRACE_SECONDS = 2.0


async def serve(settings: Settings, instance: Instance) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly."""
    started_at = time.time()
    session = SessionManager(settings.issuer or None)
    registry = CallerRegistry()
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_REQUEST_BYTES)])
    # The registration functions only call the two methods CheckedRegistration has.
    checked = cast(
        grpc.aio.Server,
        CheckedRegistration(server, CallerCheck(registry, allowed_uid=os.geteuid())),
    )
    broker_pb2_grpc.add_TokenBrokerServicer_to_server(
        TokenBrokerServicer(session, DaemonInfo(instance.socket_path, started_at)), checked
    )
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]  # set at import
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, checked)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        reflection.aio.ReflectionServicer(  # type: ignore[attr-defined]  # set at import
            (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
        ),
        checked,
    )
    server.add_insecure_port(f"unix:{instance.private_socket_path}")
    await server.start()
    front = FrontListener(instance.listening, os.fspath(instance.private_socket_path), registry)
    await front.start()
    for service in ("", SERVICE_NAME):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    log.info(
        "ready",
        extra={
            "socket": str(instance.socket_path),
            "issuer": settings.issuer or None,
            "startup_ms": round((time.time() - started_at) * 1000, 1),
        },
    )
    await stopping.wait()

    log.info("stopping", extra={"connections": len(front.connections)})
    await health_servicer.enter_graceful_shutdown()
    session.events.close("the daemon is stopping")
    await front.stop_accepting()
    await server.stop(SHUTDOWN_GRACE_SECONDS)
    await front.close()
    log.info("stopped")
