"""Assembles the daemon: the checked gRPC server, the sessions, the sign-in page, shutdown.

Two parts load late, each in a worker thread, so the socket serves at once: the OAuth
stack once the daemon is ready (oauth_stack.py: the providers and the store), and the
loopback page at a browser's first visit (web/site.py: Starlette and uvicorn). Those
are the two imports made inside functions here, and the only ones.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import signal
import socket
import time
from typing import TYPE_CHECKING

from grpclib.health.check import ServiceStatus
from grpclib.health.service import Health

from ..identities import name_of
from ..locations import AUTOSTARTED_ENV
from ..session.accounts.events import WatcherDropped
from ..session.clock import SteadyClock
from ..session.manager import SessionManager
from ..session.providers.dpop_requirements import DpopRequirements
from ..session.providers.links import Providers
from ..session.schedule import REFRESH_ANSWER_SECONDS
from ..states import EventKind
from ..store.aliases import AliasFile
from ..store.audit_log import AuditTrail
from ..store.dpop_requirements import REQUIREMENTS_FILE, RequirementFile
from ..v1 import broker_pb2
from .api.account_calls import AccountCalls
from .api.dispatch import ServiceHandlers, StockService
from .api.dpop_calls import DpopCalls
from .api.forward_calls import ForwardCalls
from .api.forwards import Forwards
from .api.json_calls import JsonCalls
from .api.manager_calls import ManagerCalls
from .api.reflection import reflection_on
from .api.service_info import DaemonInfo
from .api.servicer import TokenBrokerServicer
from .api.transport import (
    CheckedServer,
    ConnectionTable,
    DescriptorBudget,
    TransportGate,
    quiet_accept_errors,
)
from .apps.gate import AppGate
from .apps.policy import Decision, PolicyFile
from .callers.browsers import BrowserHosts
from .callers.identity import identify_caller
from .config_files import managed_problems
from .host.desktop import notify
from .host.instance import Instance, loopback_base_url
from .host.memory import FreedMemory
from .host.systemd import Notifier, watchdog_seconds
from .idle_exit import (
    STARTED_BY_ACTIVATION,
    STARTED_BY_AUTOSTART,
    IdleExit,
    Work,
    callers_gone,
    queue_taken_in,
    seconds_for,
    test_pause,
)
from .settings import Settings
from .stopping import stop
from .token_files import TokenFiles
from .web import BEGIN_PATH
from .web.on_demand import PageOnDemand

if TYPE_CHECKING:  # loaded at a browser's first visit (_serve_page)
    from .web.site import SignInSite

log = logging.getLogger(__name__)

SERVICE = broker_pb2.DESCRIPTOR.services_by_name["TokenBroker"]

# A test hook that shortens how long a refresh's answer may stay silent (it may only
# shorten it), so a test sees a stalled answer given up in seconds.
ANSWER_IDLE_ENV = "SIGNIN_BROKER_TEST_REFRESH_IDLE_SECONDS"


async def serve(settings: Settings, instance: Instance, web_socket: socket.socket) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly."""
    started_at = time.time()
    audit = AuditTrail(
        settings.state_dir / "audit.sqlite3",
        retention_days=settings.audit_retention_days,
        keep_days=settings.audit_keep_days,
    )
    session = SessionManager(
        revalidate_seconds=settings.revalidate_seconds,
        step_up_seconds=settings.step_up_timeout_seconds,
        audit=audit,
        clock=SteadyClock(),
        answer_idle=_refresh_answer_idle(),
    )
    notifier = Notifier()
    web_url = loopback_base_url(web_socket)
    info = DaemonInfo(
        instance.socket_path,
        started_at,
        web_url=web_url,
        sign_in_url=web_url + BEGIN_PATH,
        started_by=_started_by(instance, notifier),
        config_warnings=_managed_config(settings),
    )
    api = _Api(settings, session, info, audit)
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(quiet_accept_errors)
    await api.server.start(sock=instance.listening, backlog=api.backlog)
    api.serving.set(True)
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    _say_ready(settings, instance, info)
    notifier.send(READY="1", STATUS=f"serving {instance.socket_path}", MAINPID=str(os.getpid()))
    watchdog = loop.create_task(_watchdog(notifier, stopping))
    await audit.open()  # before sessions come back: a removal's row must be written first
    auditing = loop.create_task(audit.run())
    keeper, page = await _start_sessions(settings, session, web_socket)
    notices = loop.create_task(_tell_the_person(session))
    files = api.token_files.start()
    idle = IdleExit(
        seconds_for(settings.idle_exit_seconds, info.started_by), _work_of_its_own(api, session)
    )
    idling = loop.create_task(_exit_when_idle(idle, api, instance, keeper, stopping))
    await stopping.wait()

    notifier.send(STOPPING="1", STATUS="stopping")
    watchdog.cancel()
    log.info("stopping", extra={"connections": len(api.connections)})
    api.serving.set(False)
    await api.forwards.close_all()  # their connections are refused at once, their sockets gone
    await stop(
        session, api.server, api.connections, page, [keeper, files, auditing, notices, idling]
    )
    notifier.close()
    log.info("stopped")


class _Api:
    """The API on the main socket and on forwards: the servicers, each RPC guarded, the server."""

    def __init__(
        self, settings: Settings, session: SessionManager, info: DaemonInfo, audit: AuditTrail
    ) -> None:
        apps = AppGate(
            PolicyFile(settings.app_policy),
            Decision(settings.new_apps),
            settings.ask_timeout_seconds,
        )
        budget = DescriptorBudget.of_this_process()
        self.backlog = budget.backlog
        self.connections = ConnectionTable(budget.connections)  # every socket's
        freed = FreedMemory()  # given back after a burst of ended connections, on any socket
        self.forwards = Forwards(
            info.socket_path, apps, os.geteuid(), connections=self.connections, freed=freed
        )
        # Written with no app asking: the daemon keeps running while there are any
        # (a row of _work_of_its_own).
        self.token_files = TokenFiles(settings.token_files, session, apps, audit)
        forward_calls = ForwardCalls(session, self.forwards, audit)
        servicers = [
            TokenBrokerServicer(session, info, audit, self.token_files),
            AccountCalls(session, info, audit),
            ManagerCalls(session, apps, audit),
            DpopCalls(session),
            forward_calls,
        ]
        broker = ServiceHandlers(servicers, SERVICE, apps=apps, ready=session.ready)
        reduced = broker.replacing({"GetStatus": forward_calls.reduced_status})
        self.forwards.start(reduced, forward_calls.closed)
        self.serving = ServiceStatus()
        identify = functools.partial(identify_caller, browsers=BrowserHosts(settings.browsers))
        gate = TransportGate(frozenset({os.geteuid()}), self.connections, identify)
        health = Health({broker: [self.serving]})
        stock = [
            StockService(service, apps) for service in [health, *reflection_on([broker, health])]
        ]
        self.server = CheckedServer([broker, *stock], gate, JsonCalls(broker.unary), freed)


def _work_of_its_own(api: _Api, session: SessionManager) -> list[Work]:
    """Everything that keeps the daemon from exiting when idle, asked in this one place.

    Apps connected (a watcher too), forwards open, token files configured (their readers
    never call: a daemon gone would leave a stale token behind), and the sessions' own:
    sign-ins and step-ups under way, renewals and confirmations at the provider, watchers.
    """
    return [
        Work("connections", lambda: len(api.connections)),
        Work("forwards", lambda: len(api.forwards.listed())),
        Work("token files", lambda: api.token_files.count),
        *(Work(kind, count) for kind, count in session.work_counters().items()),
    ]


async def _exit_when_idle(
    idle: IdleExit,
    api: _Api,
    instance: Instance,
    keeper: asyncio.Task[None],
    stopping: asyncio.Event,
) -> None:
    """Once idle for the setting's seconds: take no more callers, answer those in, stop.

    In the same step as the last look found nothing under way, no renewal may begin
    (the keeper ends). Then the socket takes no more callers: one the service manager
    holds keeps those who come next for the next daemon; one of the daemon's own is
    removed first, so they start the next one (autostart), and what was queued on it
    already is taken in. Whoever got in meanwhile is answered as at any other time,
    and the daemon stops once they have gone (daemon/idle_exit.py).
    """
    await idle.idle()
    keeper.cancel()
    if pause := test_pause():
        await asyncio.sleep(pause)
    if not instance.activated:
        instance.withdraw()
        await queue_taken_in(instance.listening)
    api.server.stop_listening()
    await callers_gone(lambda: len(api.connections))
    stopping.set()


def _say_ready(settings: Settings, instance: Instance, info: DaemonInfo) -> None:
    """The log's "ready" line: where the daemon serves, which providers, from which settings."""
    log.info(
        "ready",
        extra={
            "socket": str(instance.socket_path),
            "web": info.web_url + "/",
            "issuer": next(
                (p.issuer for p in settings.providers if p.alias == settings.default_alias), None
            ),
            "providers": [name_of(p.alias) for p in settings.providers],
            "managed_config": [str(path) for path in settings.managed_files],
            "setting_sources": {name_of(p.alias): p.sources for p in settings.providers},
            "startup_ms": round((time.time() - info.started_at) * 1000, 1),
        },
    )


async def _start_sessions(
    settings: Settings, session: SessionManager, web_socket: socket.socket
) -> tuple[asyncio.Task[None], PageOnDemand]:
    """After "ready": load the OAuth stack, restore stored sessions, offer the sign-in page.

    The page loads when a browser first comes (web/on_demand.py); its port is bound already.
    """
    await asyncio.to_thread(importlib.import_module, f"{__package__}.oauth_stack")
    from . import oauth_stack  # loaded just now, off the event loop

    store, storage = await asyncio.to_thread(oauth_stack.open_store, settings)
    requirements = DpopRequirements(RequirementFile(settings.state_dir / REQUIREMENTS_FILE))
    await asyncio.to_thread(requirements.load)
    links = [
        await oauth_stack.provider_link(settings, provider, requirements)
        for provider in settings.providers
    ]
    aliases = AliasFile(settings.state_dir / "aliases.json")
    await session.start(Providers(links, settings.default_alias), store, storage, aliases)
    keeper = asyncio.get_running_loop().create_task(session.keep())
    page = PageOnDemand(web_socket, functools.partial(_serve_page, web_socket, session))
    page.start()
    web_url = loopback_base_url(web_socket)
    log.info(
        "sign-in page ready", extra={"web": web_url + "/", "storage": session.overview.storage}
    )
    return keeper, page


async def _serve_page(web_socket: socket.socket, session: SessionManager) -> SignInSite:
    """Load Starlette and uvicorn (in a worker thread) and serve the page on its socket."""
    await asyncio.to_thread(importlib.import_module, f"{__package__}.web.site")
    from .web.site import SignInSite  # loaded just now, off the event loop

    site = SignInSite(web_socket, session, own_uid=os.geteuid())
    await site.start()
    log.debug("sign-in page loaded at its first visit")
    return site


async def _tell_the_person(session: SessionManager) -> None:
    """Desktop notifications: a session ended or at risk unasked, a step-up sign-in awaited.

    Ended: revoked, or expired unrenewable; at risk: its new refresh token could not be
    saved. The person would otherwise learn it from the next app that fails; status says
    the same until they sign in again, or until the state is saved. An app's token request
    that waits for a stronger sign-in says so once per app.
    """
    with session.subscribe(own=True) as events:
        while True:
            try:
                event = await events.next()
            except WatcherDropped:
                return  # the daemon is stopping
            if event.step_up:
                notify(
                    "A stronger sign-in is needed", f"{event.detail[:1].upper()}{event.detail[1:]}."
                )
            elif event.kind is EventKind.DEGRADED and event.restart_signs_out:
                notify("Sign-ins cannot be saved", f"{event.detail[:1].upper()}{event.detail[1:]}.")
            elif (ended := event.ended) is not None:
                notify(
                    f"{ended.display_name or ended.account} is signed out",
                    f"{ended.reason[:1].upper()}{ended.reason[1:]}."
                    " Sign in again: signin-broker login",
                )


def _started_by(instance: Instance, notifier: Notifier) -> str:
    if instance.activated:
        return STARTED_BY_ACTIVATION
    if notifier.enabled:
        return "service manager"
    return STARTED_BY_AUTOSTART if os.environ.pop(AUTOSTARTED_ENV, "") else "manual"


async def _watchdog(notifier: Notifier, stopping: asyncio.Event) -> None:
    """WATCHDOG=1 at half the interval systemd asked for, while the event loop runs.

    A loop that is stuck sends nothing, and systemd restarts the daemon (Restart=).
    """
    interval = watchdog_seconds()
    if interval is None or not notifier.enabled:
        return
    while not stopping.is_set():
        notifier.send(WATCHDOG="1")
        await asyncio.sleep(interval / 2)


def _managed_config(settings: Settings) -> tuple[str, ...]:
    """What is wrong with the managed files (logged), the files read now remembered."""
    files = (settings.state_dir, settings.managed_files, settings.managed_leading_nowhere)
    try:
        problems = managed_problems(*files, remember=True)
    except OSError as error:  # a full or read-only state folder: remembered at a later start
        log.warning("the managed files read could not be remembered", extra={"reason": str(error)})
        problems = managed_problems(*files, remember=False)
    for problem in problems:
        log.warning("a managed config file is missing", extra={"reason": problem})
    return tuple(problems)


def _refresh_answer_idle() -> float:
    """How long a refresh's answer may stay silent: REFRESH_ANSWER_SECONDS, or a test's less."""
    given = os.environ.get(ANSWER_IDLE_ENV, "")
    try:
        seconds = float(given)
    except ValueError:
        return REFRESH_ANSWER_SECONDS
    if not 0 < seconds < REFRESH_ANSWER_SECONDS:
        return REFRESH_ANSWER_SECONDS
    log.warning(f"TEST MODE: a refresh's answer may be silent {seconds:g} s ({ANSWER_IDLE_ENV})")
    return seconds
