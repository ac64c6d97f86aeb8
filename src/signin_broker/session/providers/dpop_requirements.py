"""Which providers require DPoP of which client, as sign-ins learned it, kept for a while.

A provider may offer DPoP (RFC 9449) to every client and require it of some (panva's
oidc-provider with `dpop_bound_access_tokens`). Only the second binds a sign-in's
tokens by default: Bearer tokens are what curl, git, kubectl, docker and gRPC apps in
other languages send, so a requirement wrongly learned would break every tool of the
person. Nothing in discovery says which clients must prove: a sign-in learns it only
from what the provider itself shows (oidc.dpop.requirement_shown: a refusal naming
DPoP, or the same code refused without a proof and taken with one), never from a
code that was refused both ways, which anyone could send to the loopback page.

What was learned is kept in the state folder with when and why, so that the next
sign-in, after a restart too, proves from its first request; status shows it. It is
forgotten at the next sign-in that succeeds without a proof, after
schedule.DPOP_REQUIREMENT_SECONDS (a sign-in then learns it again, at the cost of one
refused request, if it still holds), and by `signin-broker doctor --forget-dpop`,
which edits the file: the daemon reads it again before each sign-in and status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...oidc.dpop import BY_PROVIDER, BY_SETTING
from ...store.dpop_requirements import KeptRequirement
from ..schedule import DPOP_REQUIREMENT_SECONDS

if TYPE_CHECKING:
    from ...oidc.dpop import DpopKey
    from ...oidc.provider import Provider
    from ..ports import RequirementStore

log = logging.getLogger(__name__)

# An entry an earlier version kept without saying why.
UNSAID = "learned by an earlier version, which did not keep why"

Pair = tuple[str, str]  # an issuer and a client id
_UNREAD = object()  # the stamp of a file not read yet


def bound_by(provider: Provider, key: DpopKey | None) -> str:
    """Why a sign-in's tokens are bound to `key`: the provider's requirement, else the setting."""
    if key is None:
        return ""
    return BY_PROVIDER if provider.dpop_required else BY_SETTING


@dataclass(frozen=True, slots=True)
class Requirement:
    """A client a provider requires DPoP of: since when, why, and until when it is kept."""

    learned_at: float  # Unix seconds
    reason: str

    @property
    def until(self) -> float:
        """When it is forgotten unless a sign-in learns it again (Unix seconds)."""
        return self.learned_at + DPOP_REQUIREMENT_SECONDS


class DpopRequirements:
    """The (issuer, client id) pairs known to require DPoP, and the file that keeps them."""

    def __init__(
        self, store: RequirementStore | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._store = store
        self._clock = clock  # the wall clock: what is kept outlives the process
        self._kept: dict[Pair, Requirement] = {}
        self._stamp: object = _UNREAD  # the file's (_stamp_of), as last read
        self._unsaved = False  # the last save failed: what is known is in memory only
        self._saving = asyncio.Lock()

    def load(self) -> None:
        """Read the file, if it changed since it was last read (blocking: it is small).

        An unreadable file is logged and read as empty: a sign-in learns it again, at
        the cost of one refused request. Entries an earlier version kept, without a
        time, count from now.
        """
        if self._store is None:
            return
        stamp = _stamp_of(self._store)
        if stamp == self._stamp:  # unchanged, or still absent (a failed save kept in memory)
            return
        try:
            entries = self._store.load()
        except (OSError, ValueError) as error:
            log.warning(
                "what sign-ins learned of providers requiring DPoP could not be read",
                extra={"reason": str(error)},
            )
            entries = []
        self._stamp = stamp
        now = self._clock()
        self._kept = {
            (entry.issuer, entry.client_id): Requirement(
                now if entry.learned_at is None else entry.learned_at, entry.reason or UNSAID
            )
            for entry in entries
        }

    def required(self, issuer: str, client_id: str) -> bool:
        """Whether the provider is known to require DPoP of this client, and not expired."""
        kept = self._kept.get((issuer, client_id))
        return kept is not None and self._clock() < kept.until

    def of(self, provider: Provider) -> Requirement | None:
        """What is known of the provider's client now (the file read again if it changed)."""
        self.load()
        kept = self._kept.get((provider.issuer, provider.client_id))
        return kept if kept is not None and self._clock() < kept.until else None

    async def refresh(self, provider: Provider) -> None:
        """Before a sign-in: the provider's flag as the file says now (forgotten? expired?)."""
        await asyncio.to_thread(self.load)
        required = self.required(provider.issuer, provider.client_id)
        if provider.dpop_required and not required:
            log.info(
                "no longer taken that the provider requires DPoP of this client",
                extra={"issuer": provider.issuer, "client_id": provider.client_id},
            )
        provider.dpop_required = required

    async def keep(self, provider: Provider) -> None:
        """Save what the provider's latest sign-in learned of its client, if that changed.

        A failed save is logged: the daemon still knows it until it stops, and the next
        sign-in's keep tries again.
        """
        pair = (provider.issuer, provider.client_id)
        async with self._saving:
            await asyncio.to_thread(self.load)
            known = self.required(*pair) if provider.dpop_required else pair not in self._kept
            if not known:
                kept = dict(self._kept)
                if provider.dpop_required:
                    reason = provider.dpop_required_reason or UNSAID
                    kept[pair] = Requirement(self._clock(), reason)
                else:
                    del kept[pair]
                self._kept = kept
            if self._store is None or (known and not self._unsaved):
                return
            try:
                await asyncio.to_thread(self._store.save, _entries(self._kept))
            except OSError as error:
                log.warning(
                    "could not save what a sign-in learned of the provider requiring DPoP",
                    extra={"issuer": pair[0], "client_id": pair[1], "reason": str(error)},
                )
                self._unsaved = True
                return
            self._unsaved = False
            self._stamp = _stamp_of(self._store)


def _entries(kept: dict[Pair, Requirement]) -> list[KeptRequirement]:
    return [
        KeptRequirement(issuer, client_id, requirement.learned_at, requirement.reason)
        for (issuer, client_id), requirement in kept.items()
    ]


def _stamp_of(store: RequirementStore) -> tuple[int, int, int] | None:
    """What tells a file changed: its inode, time and size; None when there is none."""
    try:
        found = store.path.stat()
    except OSError:
        return None
    return (found.st_ino, found.st_mtime_ns, found.st_size)
