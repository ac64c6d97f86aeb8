"""Token files kept fresh: each written before its token is due, and gone when its session ends.

Each `[token_files.<name>]` (token_file_setting.py) has a keeper of its own. A round asks
the app policy for the app `file:<name>` (asking the person when its rule says ask),
then the sessions for the token, as an app's GetToken would, and writes the file whole
when it does not hold that token (store/token_files.py), one audit row per write. The
next round comes when the token is due for renewal (IssuedToken.renew_at), at once when
the account's token is renewed or the person decides for the file, and after a backoff
(schedule.retry_after_failure) while something fails: a refused folder, a failed
write, a provider that does not answer. A file is removed as soon as its account signs
out, is revoked or is removed, when the policy denies it, and when the token it holds
expires with no successor: a file holding a dead token is worse than none. One file's
trouble is its own, said in the log, status and the doctor: it never stops the token
service to apps, nor another file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..session import audit_entries
from ..session.accounts.events import SessionEvent, WatcherDropped
from ..session.accounts.records import EVERYTHING, Entitlement, IssuedToken
from ..session.audit_entries import Actor
from ..session.errors import AccountNotFound, RetryLater, SessionError, SignInRequired
from ..session.schedule import BACKOFF_MAX_SECONDS, retry_after_failure
from ..states import EventKind
from ..store.token_files import remove_token_file, render, sweep_leftovers, write_token_file
from .refusals import AppDenied

if TYPE_CHECKING:
    from ..session.manager import SessionManager
    from ..session.ports import AuditSink
    from .apps.gate import AppGate
    from .token_file_setting import TokenFileSetting

log = logging.getLogger(__name__)

# A file that waits for a sign-in or the person's decision looks again this often (and
# at once when either comes).
QUIET_SECONDS = BACKOFF_MAX_SECONDS
ENDED = (EventKind.SIGNED_OUT, EventKind.REVOKED)
RESUBSCRIBE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class TokenFileStatus:
    """A token file as status, `--json` and the doctor show it."""

    name: str
    path: str
    format: str
    account: str  # the account whose token it holds, else the one configured ("": default)
    scopes: tuple[str, ...]
    audience: str
    written_at: float  # when it was last written (Unix seconds); 0: not by this daemon
    next_write_at: float  # when the next write is due at the latest; 0: none planned
    expires_at: int  # of the token it holds; 0: no file
    problem: str  # why it is not written, or was removed; "" when all is well


@dataclass(eq=False)
class _File:
    """One file's keeper state; changed by TokenFiles alone, on the event loop."""

    setting: TokenFileSetting
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write or removal at a time
    ends: int = 0  # its account's session ended this many times: a token got before is stale
    token_hash: int = 0  # of the token it holds (0: none): written again only for another
    account: str = ""  # the account whose token it holds
    written_at: float = 0.0
    expires_at: int = 0
    next_at: float = 0.0
    signature: tuple[int, int, int] | None = None  # the file as written: inode, size, mtime
    problem: str = ""
    failures: int = 0


class TokenFiles:
    """The configured token files, each kept by a task of its own from start() until cancelled."""

    def __init__(
        self,
        settings: tuple[TokenFileSetting, ...],
        session: SessionManager,
        apps: AppGate,
        audit: AuditSink,
    ) -> None:
        self._files = [_File(setting) for setting in settings]
        self._session = session
        self._apps = apps
        self._audit = audit
        apps.on_decision(self._decided)

    @property
    def count(self) -> int:
        """How many files are configured: while any are, the daemon keeps running."""
        return len(self._files)

    def start(self) -> asyncio.Task[None]:
        """Keep every file (after the sessions are started); cancel the task to stop."""
        return asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        if not self._files:
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(self._listen())
            for file in self._files:
                group.create_task(self._keep(file))

    def statuses(self, entitlement: Entitlement = EVERYTHING) -> list[TokenFileStatus]:
        """Each file whose account the caller may see (every one for the person's tools)."""
        return [
            TokenFileStatus(
                file.setting.name,
                str(file.setting.path),
                file.setting.format,
                file.account or file.setting.account,
                file.setting.scopes,
                file.setting.audience,
                file.written_at,
                file.next_at,
                file.expires_at if file.token_hash else 0,
                file.problem,
            )
            for file in self._files
            if entitlement.accounts is None or (file.account and entitlement.sees(file.account))
        ]

    # -- each file's keeper ------------------------------------------------------------------

    async def _keep(self, file: _File) -> None:
        """Round after round, until cancelled; a round that fails unexpectedly is retried."""
        with contextlib.suppress(OSError):
            await asyncio.to_thread(sweep_leftovers, file.setting.path)  # a killed write's
        while True:
            file.wake.clear()  # before the round: what happens meanwhile wakes the next wait
            try:
                delay = await self._round(file)
            except Exception:
                log.exception(
                    "a token file's keeper failed", extra={"token_file": file.setting.name}
                )
                delay = self._backoff(file)
            file.next_at = time.time() + delay
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(file.wake.wait(), max(delay, 0.05))

    async def _round(self, file: _File) -> float:
        """Write, keep or remove the file, as policy and session say; seconds to the next round."""
        ends, setting = file.ends, file.setting
        try:
            entitlement = await self._apps.admit_file(setting.app)
            account = self._session.names.account_id(setting.account, entitlement)
            token = await self._session.tokens.get_token(
                account, setting.scopes, 0, audience=setting.audience, entitlement=entitlement
            )
        except (AppDenied, SignInRequired, AccountNotFound) as refusal:
            await self._remove(file, self._why_not(refusal))
            return QUIET_SECONDS
        except RetryLater as error:
            return await self._keep_while_it_lives(file, str(error), error.retry_after)
        except SessionError as error:
            await self._remove(file, str(error))
            return QUIET_SECONDS
        if token.token_type != "Bearer":  # noqa: S105 - a token type's name
            await self._remove(
                file,
                f"{token.account}'s tokens are bound to the daemon's DPoP key (RFC 9449), and a"
                " file cannot hold a proof for each request; set its provider's dpop to off",
            )
            return QUIET_SECONDS
        return await self._put(file, token, ends)

    def _why_not(self, refusal: SessionError) -> str:
        if isinstance(refusal, AppDenied):
            return str(refusal)
        return f"its account is not signed in ({refusal}); written once it is (signin-broker login)"

    async def _put(self, file: _File, token: IssuedToken, ends: int) -> float:
        """Write the token if the file does not hold it; seconds to the next round."""
        if hash(token.access_token) != file.token_hash or not self._unchanged(file):
            async with file.lock:
                if file.ends != ends:  # its session ended while the token was asked for
                    return 0.0
                try:
                    signature = await asyncio.to_thread(_write, file.setting, token)
                except OSError as error:
                    file.problem = f"cannot write {file.setting.path}: {error}"
                    log.warning(
                        "a token file cannot be written",
                        extra={"token_file": file.setting.name, "reason": file.problem},
                    )
                    return self._backoff(file)
                file.signature, file.written_at = signature, time.time()
                file.token_hash, file.expires_at = hash(token.access_token), token.expires_at
            self._audit.record(
                audit_entries.token_file_written(
                    _actor(file),
                    token.account,
                    str(file.setting.path),
                    token.scopes,
                    token.expires_at,
                    audience=file.setting.audience,
                )
            )
            log.info(
                "token file written",
                extra={
                    "token_file": file.setting.name,
                    "account": token.account,
                    "expires_at": token.expires_at,
                },
            )
        file.problem, file.account = "", token.account
        due = token.renew_at - time.time()
        if due > 0:
            file.failures = 0
            return due
        return min(self._backoff(file), max(token.expires_at - time.time(), 0.0))  # renewal waits

    @staticmethod
    def _unchanged(file: _File) -> bool:
        """Whether the file is still the one written last (not removed or replaced since)."""
        try:
            info = file.setting.path.stat()
        except OSError:
            return False
        return file.signature == (info.st_ino, info.st_size, info.st_mtime_ns)

    async def _keep_while_it_lives(self, file: _File, reason: str, retry_after: float) -> float:
        """No new token now (the provider, the state folder): the file serves until it expires."""
        file.problem = f"not renewed: {reason}"
        left = file.expires_at - time.time()
        if file.token_hash and left <= 0:
            await self._remove(file, f"the token it held expired with no successor: {reason}")
            return self._backoff(file)
        wait = max(retry_after, self._backoff(file))
        return min(wait, left) if file.token_hash else wait

    def _backoff(self, file: _File) -> float:
        file.failures += 1
        return retry_after_failure(0.0, file.failures)

    async def _remove(self, file: _File, reason: str) -> None:
        """Take the file away (it would hold a token nobody should use), saying why.

        Status says it holds nothing from the start: whatever happens, it is not to be used.
        """
        async with file.lock:
            held, file.token_hash, file.signature, file.expires_at = file.token_hash, 0, None, 0
            file.problem = reason
            try:
                removed = await asyncio.to_thread(remove_token_file, file.setting.path)
            except OSError as error:
                file.problem = f"{reason}; and it cannot be removed: {error}"
                log.error(  # noqa: TRY400 - the reason says it all; no traceback
                    "a token file cannot be removed",
                    extra={"token_file": file.setting.name, "reason": file.problem},
                )
                return
        if removed or held:
            log.info(
                "token file removed", extra={"token_file": file.setting.name, "reason": reason}
            )
            self._audit.record(
                audit_entries.token_file_removed(
                    _actor(file), file.account, str(file.setting.path), reason
                )
            )

    # -- what wakes the keepers ------------------------------------------------------------

    async def _listen(self) -> None:
        """Remove the files of a session that ended; wake those a sign-in or renewal concerns.

        A watch that fell behind (or the bus closing at the stop) ends: every file looks
        again, since it may have missed an end, and the watch begins again a second later.
        """
        while True:
            with self._session.subscribe() as events, contextlib.suppress(WatcherDropped):
                while True:
                    await self._heard(await events.next())
            for file in self._files:
                file.wake.set()
            await asyncio.sleep(RESUBSCRIBE_SECONDS)

    async def _heard(self, event: SessionEvent) -> None:
        """One event: the files of a session that ended go; the others it concerns look again."""
        for file in self._files:
            if event.kind in ENDED and event.account and event.account == file.account:
                file.ends += 1
                await self._remove(file, f"{event.account}: {event.detail}")
                file.wake.set()
            elif event.kind in (EventKind.SIGNED_IN, EventKind.REFRESHED) and (
                not file.account or event.account == file.account or not file.setting.account
            ):
                file.wake.set()

    def _decided(self, app: str) -> None:
        """The person decided for an app: if it is a file, it looks again now."""
        for file in self._files:
            if file.setting.app == app:
                file.wake.set()


def _write(setting: TokenFileSetting, token: IssuedToken) -> tuple[int, int, int]:
    """The file written whole (blocking: a worker thread); its inode, size and mtime then."""
    data = render(
        setting.format,
        access_token=token.access_token,
        token_type=token.token_type,
        expires_at=token.expires_at,
        scopes=token.scopes,
        account=token.account,
    )
    write_token_file(setting.path, data)
    info = setting.path.stat()
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _actor(file: _File) -> Actor:
    """Who acts when the daemon writes a file: the file, as an app."""
    return Actor(app=file.setting.app, uid=os.geteuid(), pid=os.getpid())
