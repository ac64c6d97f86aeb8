"""Revoking a session's tokens at its provider (RFC 7009), and saying truly what happened."""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING

from ...oidc.errors import ProviderUnavailable

if TYPE_CHECKING:
    from ...oidc.dpop import DpopKey
    from ..ports import ProviderClient
    from ..tokens import TokenSet

log = logging.getLogger(__name__)


class Revocation(enum.Enum):
    """What the provider did with a signed-out session's tokens (RFC 7009)."""

    REVOKED = "revoked"
    NOT_OFFERED = "not_offered"  # no revocation_endpoint in its discovery
    FAILED = "failed"  # refused, or not reachable: the tokens may stay valid


async def revoke(
    client: ProviderClient | None, tokens: TokenSet, dpop: DpopKey | None = None
) -> tuple[Revocation, str]:
    """Revoke the refresh and access token; what the provider did, and why it failed.

    None for a client: the account's provider is no longer configured. `dpop`: the
    key the tokens are bound to, whose proof goes with each request.
    """
    if client is None:
        return Revocation.FAILED, "its identity provider is no longer configured"
    failure = ""
    for token, hint in (
        (tokens.refresh_token, "refresh_token"),
        (tokens.access_token, "access_token"),
    ):
        if token is None:
            continue
        try:
            offered = await client.revoke(token, hint, dpop)
        except ProviderUnavailable as error:
            log.warning("could not revoke a token at the provider", extra={"reason": str(error)})
            failure = failure or str(error)
            continue
        if not offered:
            log.info(
                "the provider offers no token revocation: its tokens stay valid until they expire"
            )
            return Revocation.NOT_OFFERED, ""
    return (Revocation.FAILED, failure) if failure else (Revocation.REVOKED, "")
