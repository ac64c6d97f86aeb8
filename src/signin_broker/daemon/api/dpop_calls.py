"""SignDpopProof: a DPoP proof (RFC 9449) for one request of an app, with the token it binds.

The account's key stays in the daemon; the app gets the proof and the access token
in one call. The token is chosen, renewed, refused and audited as GetToken's.
"""

from __future__ import annotations

from ...session.manager import SessionManager
from ...session.validation import check_http_method, check_request_url
from ...v1 import broker_pb2 as pb
from .account_access import Admitted
from .messages import actor_of, token_terms
from .statuses import InvalidRequest, checked

MAX_NONCE_LENGTH = 512


class DpopCalls:
    """SignDpopProof for the verified caller, within what its app policy lets it have."""

    def __init__(self, session: SessionManager) -> None:
        self._session = session

    async def SignDpopProof(
        self, request: pb.SignDpopProofRequest, admitted: Admitted
    ) -> pb.SignDpopProofResponse:
        """Check the request, then sign a proof with the key of the token's account."""
        account, scopes, audience = token_terms(request)
        method = checked(check_http_method, request.method)
        url = checked(check_request_url, request.url)
        nonce = request.nonce
        if len(nonce) > MAX_NONCE_LENGTH or not (nonce.isascii() and nonce.isprintable()):
            raise InvalidRequest(
                f"nonce must be at most {MAX_NONCE_LENGTH} printable ASCII characters"
            )
        caller, entitlement, origin = admitted.caller, admitted.entitlement, admitted.origin
        token, proof = await self._session.tokens.dpop_proof(
            admitted.account_to_see(account, self._session.names),
            scopes,
            request.min_ttl_seconds,
            method=method,
            url=url,
            nonce=nonce,
            audience=audience,
            actor=actor_of(caller, request.app_hint, origin or ""),
            entitlement=entitlement,
            refused=request.refused,
        )
        return pb.SignDpopProofResponse(
            dpop=proof,
            access_token=token.access_token,
            token_type=token.token_type,
            expires_at_unix=token.expires_at,
            scopes=token.scopes,
            account=token.account,
        )
