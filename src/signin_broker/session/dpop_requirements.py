"""Which providers require DPoP of which client, as sign-ins learned it, kept across restarts.

A provider may offer DPoP (RFC 9449) to every client and require it of some (panva's
oidc-provider with `dpop_bound_access_tokens`). Only the second binds a sign-in's
tokens by default: Bearer tokens are what curl, git, kubectl, docker and gRPC apps in
other languages send. Nothing in discovery says which clients must prove, so a
sign-in learns it from the provider's refusal of a request without a proof
(oidc.code_flow, oidc.device_flow), and this keeps what it learned in the state
folder, so that the next sign-in, after a restart too, proves from its first request.
A sign-in that succeeds without a proof (with `dpop = "off"`, say) forgets it again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..oidc.dpop import BY_PROVIDER, BY_SETTING

if TYPE_CHECKING:
    from ..oidc.dpop import DpopKey
    from ..oidc.provider import Provider
    from .ports import RequirementStore

log = logging.getLogger(__name__)


def bound_by(provider: Provider, key: DpopKey | None) -> str:
    """Why a sign-in's tokens are bound to `key`: the provider's requirement, else the setting."""
    if key is None:
        return ""
    return BY_PROVIDER if provider.dpop_required else BY_SETTING


class DpopRequirements:
    """The (issuer, client id) pairs known to require DPoP, and the store that keeps them."""

    def __init__(self, store: RequirementStore | None = None) -> None:
        self._store = store
        self._kept: frozenset[tuple[str, str]] = frozenset()
        self._saving = asyncio.Lock()

    def load(self) -> None:
        """Read what earlier sign-ins learned (blocking: at the start, in a worker thread).

        An unreadable file is logged and read as empty: a sign-in learns it again,
        at the cost of one refused request.
        """
        if self._store is None:
            return
        try:
            self._kept = frozenset(self._store.load())
        except (OSError, ValueError) as error:
            log.warning(
                "what sign-ins learned of providers requiring DPoP could not be read",
                extra={"reason": str(error)},
            )

    def required(self, issuer: str, client_id: str) -> bool:
        """Whether a sign-in learned that the provider requires DPoP of this client."""
        return (issuer, client_id) in self._kept

    async def keep(self, provider: Provider) -> None:
        """Save what the provider's latest sign-in learned of its client, if that changed.

        A failed save is logged: the daemon still knows it until it stops.
        """
        pair = (provider.issuer, provider.client_id)
        async with self._saving:
            if self._store is None or (pair in self._kept) == provider.dpop_required:
                return
            kept = self._kept | {pair} if provider.dpop_required else self._kept - {pair}
            try:
                await asyncio.to_thread(self._store.save, kept)
            except OSError as error:
                log.warning(
                    "could not save that the provider requires DPoP of this client",
                    extra={"issuer": pair[0], "client_id": pair[1], "reason": str(error)},
                )
                return
            self._kept = kept
