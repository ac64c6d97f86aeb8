"""The apps that call the daemon: what each may get, and requests waiting for the user's answer.

An app is identified by what the kernel reports for its connection (the executable)
and, for an interpreter, the script it runs (see callers.script_of). The user's
policy (policy.py) decides per app: allow, deny, or ask; apps without an entry get
the daemon's default. "ask" holds the app's token request until the user answers
with `signin-broker apps allow|deny` (a desktop notification says so where one can
be shown), or until the wait times out with PERMISSION_DENIED.

A browser extension (`browser:<browser>/<id>`, through the broker's native host) gets
tokens only for the web origins its rule lists. Which RPCs a forward or a browser
extension may call at all (tokens only) is the access table's to say (daemon/api/
access.py), whose guards alone ask this gate. A token file (`file:<name>`) is admitted
as an app is, though no process asks: the daemon writes it.

The policy keeps well-behaved apps to what the user chose; it is not a sandbox: any
program running as the user can also edit the policy file or read the keyring.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...identities import AppId, AppKind
from ...session.accounts.records import NOTHING, Entitlement
from ..callers.browsers import names_an_extension
from ..callers.forwarded import ForwardConnection
from ..callers.identity import Caller
from ..callers.pins import Unpinnable, file_sha256, running_sha256
from ..host.desktop import notify
from ..refusals import AppDenied, FixedAtOpening, NotABrowserApp, NothingWaits, UnknownApp
from .policy import AppRule, Decision, PolicyFile

log = logging.getLogger(__name__)


@dataclass
class AppRecord:
    """An app as the daemon knows it: its identity, use since start, and any waiting request."""

    id: str
    executable: str
    script: str = ""
    answer: asyncio.Future[Decision] | None = field(default=None, repr=False)
    waiters: int = 0  # requests waiting for the answer right now

    @classmethod
    def named_in_policy(cls, app: str) -> AppRecord:
        """An app known only from the policy file, by its id."""
        executable, _, script = app.partition(" ")
        return cls(app, executable, script)

    @property
    def program(self) -> str:
        """The file that a sha256 pin covers: the script, else the executable ("" if none)."""
        if self.script:
            return self.script if self.script.startswith("/") else ""
        return "" if AppId.parse(self.id).sandboxed else self.executable

    @property
    def name(self) -> str:
        """A short name for messages: the script's or the executable's file name."""
        return Path(self.script.removeprefix("-m ") or self.executable).name


@dataclass(frozen=True, slots=True)
class AppView:
    """An app with the rule that applies to it, for listing."""

    record: AppRecord
    rule: AppRule
    decided: bool
    waiting: bool


class AppGate:
    """Decides, per call, what the calling app may get."""

    def __init__(
        self,
        policy: PolicyFile,
        default: Decision,
        ask_timeout: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.policy = policy
        self.default = default
        self.ask_timeout = ask_timeout
        self._apps: dict[str, AppRecord] = {}
        self._clock = clock
        self._listeners: list[Callable[[str], None]] = []  # told of each decision, by app

    def rule_for(self, caller: Caller) -> AppRule:
        """The rule that applies to the caller now: its own, else the default."""
        self.policy.refresh()
        return self._rule_of(caller.app)

    # -- what a caller may see and get: one method per class of the access table, asked by
    # its guards alone, after they refused the kinds of caller its entry leaves out --------

    async def visible_to(self, caller: Caller) -> Entitlement:
        """What the app may see in lists and events; never refuses: nothing until allowed."""
        if caller.forward is not None:
            return caller.forward.grant.entitlement
        rule = self.rule_for(caller)
        if (
            not caller.identified
            or caller.browser
            or rule.decision is not Decision.ALLOW
            or await self._pin_refusal(rule, caller)
        ):
            return NOTHING
        return _entitlement(rule)

    async def admit_reader(self, caller: Caller) -> Entitlement:
        """Admit an app that reads (accounts, events, audit): AppDenied when its policy denies it.

        An app whose rule says ask reads nothing until the user allows it, without a
        prompt: only a token request asks.
        """
        if not caller.identified:
            raise _unidentified(caller)
        rule = self.rule_for(caller)
        if rule.decision is Decision.DENY:
            raise AppDenied(
                f"the user's app policy denies {self._record(caller).name};"
                f" to allow it: signin-broker apps allow {caller.app!r}"
            )
        return await self.visible_to(caller)

    async def admit_app(self, caller: Caller, origin: str | None = None) -> Entitlement:
        """Admit an app to tokens and sessions; waits for the user's answer when the rule says ask.

        A caller the daemon could not identify (it exited, or its program could not be
        read) is refused whatever the default: "allow" is for apps the user can name.
        A browser extension's request names the web origin it is for (`origin`, checked),
        and is admitted only for an origin its rule lists.
        """
        if not caller.identified:
            raise _unidentified(caller)
        record = self._record(caller)
        if caller.forward is not None:
            return await self._admit_forwarded(caller.forward, record)
        rule = self.rule_for(caller)
        if origin is not None and origin not in rule.origins:
            raise AppDenied(_origin_refused(caller.app, origin, rule))
        if rule.decision is Decision.ASK:
            rule = replace(rule, decision=await self._ask(record))
        if rule.decision is Decision.DENY:
            raise AppDenied(
                f"the user's app policy denies {record.name};"
                f" to allow it: signin-broker apps allow {record.id!r}"
            )
        refusal = await self._pin_refusal(rule, caller)
        if refusal:
            raise AppDenied(refusal)
        return _entitlement(rule)

    async def admit_file(self, app: str) -> Entitlement:
        """Admit a token file (`file:<name>`) to tokens, as its rule says (asked when it says ask).

        No process stands behind a file: whoever can read it has the token, so its rule
        is all there is to go by (no pin, no sandbox).
        """
        record = self._apps.get(app)
        if record is None:
            record = self._apps[app] = AppRecord(app, app)
        self.policy.refresh()
        rule = self._rule_of(app)
        if rule.decision is Decision.ASK:
            rule = replace(rule, decision=await self._ask(record))
        if rule.decision is Decision.DENY:
            raise AppDenied(
                f"the user's app policy denies {app}; to allow it: signin-broker apps allow {app!r}"
            )
        return _entitlement(rule)

    def on_decision(self, listener: Callable[[str], None]) -> None:
        """Have `listener` told the app of each decision the person makes (apps allow|deny)."""
        self._listeners.append(listener)

    async def admit_manager(self, caller: Caller) -> Entitlement:
        """Admit an app that may read or change the policy itself (the person's own tools).

        An app with a rule of its own must be allowed every account and scope: one
        limited to some accounts must not learn what other accounts exist, and a
        denied one must not allow itself. An app without a rule manages only if it is
        not sandboxed (a confined app only when new apps are allowed): an unconfined
        program of the user's could edit apps.toml anyway, and the bundled command
        must work before any rule exists.
        """
        if not caller.identified:
            raise _unidentified(caller)
        if caller.app not in self.policy.rules:
            self.policy.refresh()
        if caller.app in self.policy.rules:
            entitlement = await self.admit_reader(caller)  # refused, not asked, while undecided
            if entitlement.accounts is None and entitlement.scopes is None:
                return entitlement
        elif caller.sandbox is None or self.default is Decision.ALLOW:
            return Entitlement()
        raise AppDenied(
            f"{caller.app} may not manage the broker: only an app allowed every account"
            " and scope may; use the bundled `signin-broker` command"
        )

    async def _admit_forwarded(
        self, connection: ForwardConnection, record: AppRecord
    ) -> Entitlement:
        """A forward's connection gets the forward's grant; with confirm, once the person says so.

        The policy file has no say: the person chose the forward's policy when opening it.
        """
        if not connection.confirmed:
            if await self._ask(record) is not Decision.ALLOW:
                raise AppDenied(f"the person refused this request through {record.id}")
            connection.confirmed = True
        return connection.grant.entitlement

    def forward_closed(self, app: str) -> None:
        """A forward closed: its waiting requests are refused, and it is forgotten."""
        record = self._apps.pop(app, None)
        if record is not None:
            self._settle(record, Decision.DENY)

    async def _pin_refusal(self, rule: AppRule, caller: Caller) -> str:
        """Why the caller does not meet the rule's sha256 pin ("" when it does, or has none)."""
        if not rule.sha256:
            return ""
        try:
            running = await running_sha256(caller)
        except Unpinnable as error:
            return f"the user's app policy pins {caller.app} to one build, and {error}"
        if running != rule.sha256:
            return (
                f"{caller.app} is not the build the user's app policy allows (its sha256"
                f" changed); to allow it: signin-broker apps allow --pin {caller.app!r}"
            )
        return ""

    async def _ask(self, record: AppRecord) -> Decision:
        """Wait for the user's answer; every request of the app waiting at once shares it."""
        if record.answer is None:
            record.answer = asyncio.get_running_loop().create_future()
            _notify(record)
            log.info("an app waits for the user's answer", extra={"app": record.id})
        answer = record.answer
        record.waiters += 1
        try:
            return await asyncio.wait_for(asyncio.shield(answer), self.ask_timeout)
        except TimeoutError:
            raise AppDenied(
                f"{record.name} asked for a token and the user did not answer within"
                f" {self.ask_timeout:g} s; to allow it: signin-broker apps allow {record.id!r}"
            ) from None
        finally:
            record.waiters -= 1
            if record.waiters == 0 and record.answer is answer:
                record.answer = None  # the next request asks afresh

    # -- the user's answers -------------------------------------------------------------

    def find(self, named: str) -> AppRecord:
        """The app the user named: its id, executable or script path, or a unique file name."""
        known = self._known()
        if named in known:
            return known[named]
        if names_an_extension(named):  # its rule comes before its first request
            return AppRecord.named_in_policy(named)
        matches = [
            record
            for record in known.values()
            if named in (record.executable, record.script, record.name)
        ]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UnknownApp(f"no app called {named!r} has used the broker or is in the policy")
        raise UnknownApp(
            f"{named!r} matches {len(matches)} apps; name one by its id:"
            f" {', '.join(sorted(m.id for m in matches))}"
        )

    def answer_once(self, named: str, decision: Decision) -> tuple[AppView, int]:
        """Answer the app's waiting requests without recording a rule: the next one asks again."""
        record = self.find(named)
        if record.answer is None:
            raise NothingWaits(f"no request of {record.name} waits for an answer")
        answered = self._settle(record, decision)
        log.info("app answered once", extra={"app": record.id, "decision": str(decision)})
        self._tell(record.id)
        return self._view(record), answered

    async def decide(
        self,
        named: str,
        decision: Decision | None,
        accounts: Sequence[str] = (),
        scopes: Sequence[str] = (),
        *,
        pin: bool = False,
        id_token: bool = False,
        origins: Sequence[str] = (),
    ) -> tuple[AppView, int]:
        """Record the user's decision (None removes the entry); answer the app's waiting calls."""
        record = self.find(named)
        if AppId.parse(record.id).kind is AppKind.FORWARD:
            raise FixedAtOpening(
                f"{record.id}'s policy was chosen when it was opened; answer its waiting"
                f" request with --once, or open it again (signin-broker forward)"
            )
        if origins and AppId.parse(record.id).kind is not AppKind.BROWSER:
            raise NotABrowserApp(
                f"origins limit a browser extension (browser:<browser>/<id>), not {record.id}"
            )
        rules = dict(self.policy.rules)
        if decision is None:
            rules.pop(record.id, None)
        else:
            sha256 = await self._pin_of(record) if pin else ""
            rules[record.id] = AppRule(
                record.id,
                decision,
                tuple(accounts),
                tuple(scopes),
                sha256,
                id_token,
                tuple(origins),
            )
        self.policy.save(rules)
        effective = self._rule_of(record.id).decision  # the policy now holds `rules`
        answered = self._settle(record, effective) if effective is not Decision.ASK else 0
        log.info(
            "app policy changed",
            extra={"app": record.id, "decision": str(decision) if decision else "default"},
        )
        self._tell(record.id)
        return self._view(record), answered

    def _tell(self, app: str) -> None:
        for listener in self._listeners:
            listener(app)

    @staticmethod
    def _settle(record: AppRecord, decision: Decision) -> int:
        """Answer the app's waiting requests, if any; how many there were."""
        if record.answer is None:
            return 0
        record.answer.set_result(decision)
        record.answer = None
        return record.waiters

    @staticmethod
    async def _pin_of(record: AppRecord) -> str:
        if not record.program:
            raise UnknownApp(f"{record.id} cannot be pinned: it names no program file")
        try:
            return await asyncio.to_thread(file_sha256, record.program)
        except Unpinnable as error:
            raise UnknownApp(f"{record.id} cannot be pinned: {error}") from None

    def apps(self) -> list[AppView]:
        """Apps seen since the daemon started and apps in the policy, by id."""
        return sorted((self._view(r) for r in self._known().values()), key=lambda v: v.record.id)

    def _known(self) -> dict[str, AppRecord]:
        """Apps in the policy file and apps seen since the daemon started, by id."""
        self.policy.refresh()
        return {app: AppRecord.named_in_policy(app) for app in self.policy.rules} | self._apps

    def _rule_of(self, app: str) -> AppRule:
        """The app's own rule, else the default for new apps."""
        return self.policy.rules.get(app) or AppRule(app, self.default)

    def _view(self, record: AppRecord) -> AppView:
        decided = record.id in self.policy.rules
        # Waiting until answered, not until the answered requests have resumed: a list
        # asked for right after an answer must not offer that request for answering again.
        return AppView(record, self._rule_of(record.id), decided, waiting=record.answer is not None)

    def _record(self, caller: Caller) -> AppRecord:
        record = self._apps.get(caller.app)
        if record is None:
            record = AppRecord(caller.app, caller.executable, caller.script)
            self._apps[caller.app] = record
        return record


def _unidentified(caller: Caller) -> AppDenied:
    if caller.refusal:
        return AppDenied(f"refused: {caller.refusal}")
    return AppDenied(
        f"the broker could not tell which program is calling (pid {caller.pid}: it exited"
        " or changed before it could be identified); try again"
    )


def _origin_refused(app: str, origin: str, rule: AppRule) -> str:
    allowed = ", ".join(rule.origins) or "none"
    return (
        f"{app} may not get tokens for {origin} (its policy's origins: {allowed}); to allow"
        f" it: signin-broker apps allow {app!r} --origin {origin}"
    )


def _entitlement(rule: AppRule) -> Entitlement:
    return Entitlement(
        accounts=frozenset(rule.accounts) if rule.accounts else None,
        scopes=frozenset(rule.scopes) if rule.scopes else None,
        id_token=rule.id_token,
    )


def _notify(record: AppRecord) -> None:
    """A desktop notification that an app waits for an answer, where one can be shown."""
    notify(
        f"{record.name} asks for your sign-in",
        f"Allow: signin-broker apps allow {record.id!r}\n"
        f"Deny: signin-broker apps deny {record.id!r}",
    )
