"""One OpenID provider as a client reaches it: discovery, the token endpoint, userinfo, revocation.

The discovery document (with its RFC 8414 complement) is read again once a day, and
soon after an endpoint answers 404. Every request is one bounded exchange: its whole
answer within a time limit and MAX_ANSWER_BYTES, or AnswerLost when it may have
arrived but no answer did; the provider's Date header measures its clock. An answer
is read as OAuth reads it (the functions at the end): a bounded body, JSON, an error
code, so that a captive portal's page or an oversized body never passes for the
provider's word.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import httpx2

from .._version import __version__
from ..json_depth import within_depth
from .answers import DEVICE_CODE_GRANT, MAX_ANSWER_BYTES, DeviceAuthorization, TokenResponse
from .client_auth import ClientAuth
from .dpop import IF_REQUIRED, REQUIRE, DpopKey, Nonces, is_bound, key_for, retry_key
from .errors import (
    AnswerLost,
    AnswerUnusable,
    OAuthError,
    ProviderMisfit,
    ProviderUnavailable,
    failure_reason,
)
from .id_tokens import SET_THE_CLOCK, IdTokenChecker, clock_off
from .metadata import (
    METADATA_REFRESH_SECONDS,
    METADATA_RETRY_SECONDS,
    OAUTH_METADATA,
    ProviderMetadata,
    discovery_url,
    oauth_metadata_urls,
)
from .parameters import token_request
from .provider_clock import ProviderClock
from .trust import verifying_context

log = logging.getLogger(__name__)

HTTP_TIMEOUT_SECONDS = 10.0
# However steadily it keeps coming, an answer awaited while it arrives (a refresh's) is
# given up after this long.
ANSWER_BOUND_SECONDS = 900.0
CLOCK_NOTICED_SECONDS = 60  # status says the clock is off from this much on
# A DPoP challenge among an answer's WWW-Authenticate challenges (RFC 9449 7.1, RFC 9110 11.6.1).
DPOP_CHALLENGE = re.compile(r"(?:^|,)\s*DPoP(?:\s|,|$)", re.IGNORECASE)


class Provider:
    """One OpenID provider, reached over HTTPS (or loopback HTTP) from its issuer URL."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        http: httpx2.AsyncClient | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        client_auth: ClientAuth | None = None,
        dpop: str = IF_REQUIRED,
        dpop_required: bool = False,
    ) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self.dpop = dpop  # the `dpop` setting: if-required, auto, require or off (oidc.dpop)
        # Whether the provider requires DPoP of this client, and what showed it (""
        # when it was known before): learned by a sign-in, kept by the caller.
        self.dpop_required = dpop_required
        self.dpop_required_reason = ""
        self._nonces = Nonces()
        self._client_auth = client_auth or ClientAuth(client_id)  # a public client by default
        self._http = http or httpx2.AsyncClient(
            timeout=HTTP_TIMEOUT_SECONDS,
            follow_redirects=False,
            headers={"User-Agent": f"signin-broker/{__version__}"},
            verify=verifying_context(issuer),
        )
        self._clock = clock
        self._metadata: ProviderMetadata | None = None
        self._metadata_read_at = 0.0
        self._metadata_due = 0.0  # when the discovery document is read again
        self._metadata_lock = asyncio.Lock()
        self._id_tokens = IdTokenChecker(client_id, self._get_json, clock)
        self._provider_clock = ProviderClock()  # its time, by the Date of its last answer

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    async def metadata(self) -> ProviderMetadata:
        """The discovery document, read again when due (daily, or soon after a 404).

        A failed re-read keeps the last good document and is tried again a minute
        later, so a provider that is briefly down or misconfigured stops nothing.
        """
        async with self._metadata_lock:
            now = self._clock()
            if self._metadata is None or now >= self._metadata_due:
                try:
                    self._metadata = await self._discover()
                except ProviderUnavailable as error:
                    if self._metadata is None:
                        raise
                    log.warning(
                        "could not read the discovery document again; using the last one",
                        extra={"reason": str(error)},
                    )
                    self._metadata_due = now + METADATA_RETRY_SECONDS
                else:
                    self._metadata_read_at = now
                    self._metadata_due = now + METADATA_REFRESH_SECONDS
            return self._metadata

    async def _discover(self) -> ProviderMetadata:
        """The discovery document, with the fields it lacks taken from RFC 8414 metadata.

        django-oauth-toolkit, for one, lists its revocation endpoint only there.
        """
        extra = asyncio.ensure_future(self._oauth_metadata())  # meanwhile: no extra round trip
        try:
            document = await self._get_json(discovery_url(self.issuer), "discovery")
        except BaseException:
            extra.cancel()  # never left running on its own
            raise
        merged = await extra
        if isinstance(document, dict) and document.get("issuer") == self.issuer:
            document = {**merged, **document}
        return ProviderMetadata.from_document(document, self.issuer)

    async def _oauth_metadata(self) -> dict[str, Any]:
        """The provider's RFC 8414 metadata naming this issuer; {} when it has none."""
        for url in oauth_metadata_urls(self.issuer):
            try:
                document = await self._get_json(url, OAUTH_METADATA)
            except ProviderUnavailable as error:
                log.debug("no RFC 8414 metadata here", extra={"url": url, "reason": str(error)})
                continue
            if isinstance(document, dict) and document.get("issuer") == self.issuer:
                return document
            log.info("RFC 8414 metadata for another issuer is ignored", extra={"url": url})
        return {}

    def _endpoint_gone(self) -> None:
        """An endpoint answered 404: read the discovery document again, within a minute."""
        self._metadata_due = min(
            self._metadata_due, self._metadata_read_at + METADATA_RETRY_SECONDS
        )

    async def new_dpop_key(self) -> DpopKey | None:
        """A key pair for a new sign-in's tokens, as the `dpop` setting and discovery say.

        None: no DPoP here. ProviderMisfit when `require` meets a provider without it.
        """
        offered = (await self.metadata()).dpop_signing_algorithms
        where = f"the provider {self.issuer}"
        return key_for(self.dpop, offered, where, required=self.dpop_required)

    async def key_after_refusal(self, refusal: OAuthError) -> DpopKey | None:
        """A key to send a token request refused without a proof again with (oidc.dpop)."""
        return retry_key(self.dpop, (await self.metadata()).dpop_signing_algorithms, refusal)

    def learned_dpop_required(self, reason: str) -> None:
        """The provider showed that it requires DPoP of this client (dpop.requirement_shown)."""
        if not self.dpop_required:
            self.dpop_required = True
            self.dpop_required_reason = reason
            log.info(
                "the provider requires DPoP of this client: its sign-ins bind tokens from now on",
                extra={"issuer": self.issuer, "client_id": self.client_id, "reason": reason},
            )

    async def exchange_code(
        self, code: str, redirect_uri: str, code_verifier: str, dpop: DpopKey | None = None
    ) -> TokenResponse:
        """Redeem an authorization code (RFC 6749 4.1.3 with RFC 7636's code_verifier).

        `dpop`: the key the tokens are bound to (RFC 9449), as at each request below.
        """
        body = token_request(
            "authorization_code",
            redirect_uri=redirect_uri,
            code=code,
            client_id=self.client_id,
            code_verifier=code_verifier,
        )
        return await self._token_request(body, dpop=dpop)

    async def refresh(
        self,
        refresh_token: str,
        scope: str | None = None,
        resource: str | None = None,
        *,
        answer_within: float | None = None,
        dpop: DpopKey | None = None,
    ) -> TokenResponse:
        """Trade a refresh token for a new access token (RFC 6749 section 6).

        A narrower `scope` and a `resource` (RFC 8707) ask for a down-scoped token.
        `answer_within`: seconds of silence its answer is awaited once sent, while it
        keeps coming (the manager's choice; ANSWER_BOUND_SECONDS in all).
        """
        body = token_request(
            "refresh_token",
            refresh_token=refresh_token,
            client_id=self.client_id,
            scope=scope,
            resource=resource,
        )
        return await self._token_request(body, answer_within, dpop)

    async def client_credentials(
        self, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """A token for the client itself (RFC 6749 section 4.4): a service account's.

        No person, and no refresh token kept (RFC 6749 4.4.3: none should be issued):
        the grant is simply made again. `resource` asks for one audience (RFC 8707).
        """
        body = token_request("client_credentials", scope=scope, resource=resource)
        return replace(await self._token_request(body), refresh_token=None, id_token=None)

    async def device_authorization(
        self, scope: str, extra: dict[str, str] | None = None
    ) -> DeviceAuthorization:
        """Ask for a device code and the code the user enters elsewhere (RFC 8628 3.1-3.2)."""
        url = (await self.metadata()).device_authorization_endpoint
        if not url:
            raise ProviderUnavailable("the provider offers no device sign-in (RFC 8628)")
        body = urlencode({"scope": scope, **(extra or {})})
        return DeviceAuthorization.from_json(
            await self._post_form(url, "device authorization", body)
        )

    async def poll_device(self, device_code: str, dpop: DpopKey | None = None) -> TokenResponse:
        """One poll of the token endpoint for a device code (RFC 8628 3.4).

        OAuthError carries authorization_pending, slow_down, access_denied or expired_token.
        """
        body = urlencode(
            {
                "grant_type": DEVICE_CODE_GRANT,
                "device_code": device_code,
                "client_id": self.client_id,
            }
        )
        return await self._token_request(body, dpop=dpop)

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, Any]:
        """The user's claims; OAuthError("invalid_token") when the provider rejects the token.

        `dpop`: the key a DPoP-bound token is sent with (None: a Bearer token).
        """
        url = (await self.metadata()).userinfo_endpoint
        if not url:
            raise ProviderUnavailable("the provider has no userinfo endpoint")
        response = await self._send("GET", url, "userinfo", bearer=access_token, dpop=dpop)
        if response.status_code in (401, 403):
            raise OAuthError("invalid_token", "the provider rejected the access token", 401)
        claims = json_of(response, "userinfo")
        if not isinstance(claims, dict):
            raise ProviderUnavailable("the userinfo response is not a JSON object")
        return claims

    async def revoke(self, token: str, hint: str, dpop: DpopKey | None = None) -> bool:
        """Revoke a token (RFC 7009) if the provider offers it; False when it does not."""
        url = (await self.metadata()).revocation_endpoint
        if not url:
            return False
        body = urlencode({"token": token, "token_type_hint": hint})
        response = await self._send_form(url, "revocation", body, dpop=dpop)
        if response.status_code >= 400:
            raise ProviderUnavailable(f"revocation answered HTTP {response.status_code}")
        return True

    async def validate_id_token(self, id_token: str, nonce: str | None) -> dict[str, Any]:
        """Check an id_token's signature, iss, aud, exp, iat and nonce; return its claims."""
        metadata = await self.metadata()
        return await self._id_tokens.validate(id_token, nonce, metadata, self.clock_offset)

    async def _token_request(
        self, body: str, answer_within: float | None = None, dpop: DpopKey | None = None
    ) -> TokenResponse:
        url = (await self.metadata()).token_endpoint
        sent_at = time.monotonic()
        answer = await self._post_form(url, "token", body, answer_within, dpop)
        tokens = replace(TokenResponse.from_json(answer), sent_at=sent_at)
        if dpop is not None and self.dpop == REQUIRE and not is_bound(tokens.token_type):
            raise ProviderMisfit(
                "dpop is require, but the provider answered a DPoP proof with a"
                f" {tokens.token_type} token, bound to no key; enable DPoP for this client there"
            )
        return tokens

    async def _post_form(
        self,
        url: str,
        what: str,
        body: str,
        answer_within: float | None = None,
        dpop: DpopKey | None = None,
    ) -> Any:
        """POST a form as this client; the JSON answer, or OAuthError, or ProviderUnavailable."""
        response = await self._send_form(url, what, body, answer_within, dpop=dpop)
        if 400 <= response.status_code < 500:
            raise oauth_error(response)
        return json_of(response, what)

    async def _send_form(
        self,
        url: str,
        what: str,
        body: str,
        answer_within: float | None = None,
        *,
        dpop: DpopKey | None = None,
    ) -> httpx2.Response:
        """POST a form authenticated as this client (see client_auth.py).

        A refusal of the client's credentials is logged with what may help to fix it:
        the caller sees only invalid_client.
        """
        metadata = await self.metadata()
        content, headers, method = self._client_auth.sign(body, metadata)
        response = await self._send(
            "POST",
            url,
            what,
            content=content,
            headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
            answer_within=answer_within,
            dpop=dpop,
        )
        if 400 <= response.status_code < 500 and oauth_error(response).error == "invalid_client":
            if self._client_auth.form_instead(method, metadata):  # once: the form is now chosen
                retried = await self._send_form(url, what, body, answer_within, dpop=dpop)
                if retried.status_code < 400:
                    log.info(
                        "client authentication works with client_secret_post",
                        extra={"client_id": self.client_id, "instead_of": method},
                    )
                return retried
            self._client_auth.refused(method, what, metadata)
        return response

    @property
    def confidential(self) -> bool:
        """Whether this client authenticates itself to the provider (a secret, a key)."""
        return self._client_auth.confidential

    @property
    def clock_problem(self) -> str:
        """How far this device's clock is off the provider's, if over a minute; else ""."""
        off = self.clock_offset
        if off is None or abs(off) < CLOCK_NOTICED_SECONDS:
            return ""
        return f"{clock_off(off)} (by its Date header); {SET_THE_CLOCK}"

    @property
    def clock_offset(self) -> float | None:
        """The provider's clock less this device's (to a second or so); None before an answer."""
        return self._provider_clock.offset

    def provider_time(self) -> float:
        """Now by the provider's clock, as its last Date header told it (this device's before).

        A DPoP proof's `iat` is checked against the server's clock, within a minute or a
        few: a device whose clock is off, or was stepped since, would have every proof
        refused (provider_clock.py).
        """
        return self._provider_clock.now()

    async def _get_json(self, url: str, what: str) -> Any:
        return json_of(await self._send("GET", url, what), what)

    async def _send(
        self,
        method: str,
        url: str,
        what: str,
        *,
        bearer: str | None = None,
        content: str | None = None,
        headers: dict[str, str] | None = None,
        answer_within: float | None = None,
        dpop: DpopKey | None = None,
    ) -> httpx2.Response:
        """One request, with a DPoP proof when `dpop` is given (the token then sent as DPoP).

        A use_dpop_nonce refusal (RFC 9449 8, 9) is answered once with the nonce given.
        """

        def signed() -> dict[str, str]:
            sent = {**(headers or {})}
            if dpop is not None:
                nonce = self._nonces.get(url)
                sent["DPoP"] = dpop.proof(
                    method, url, access_token=bearer, nonce=nonce, now=self.provider_time()
                )
            if bearer is not None:
                sent["Authorization"] = f"{'DPoP' if dpop else 'Bearer'} {bearer}"
            return sent

        response = await self._exchange(
            method, url, what, content=content, headers=signed(), answer_within=answer_within
        )
        if dpop is not None and self._nonces.learn(url, response):
            log.debug("the server asked for a DPoP nonce: once more", extra={"what": what})
            response = await self._exchange(
                method, url, what, content=content, headers=signed(), answer_within=answer_within
            )
            self._nonces.learn(url, response)
        return response

    async def _exchange(
        self,
        method: str,
        url: str,
        what: str,
        *,
        content: str | None,
        headers: dict[str, str],
        answer_within: float | None,
    ) -> httpx2.Response:
        """One request and its whole answer; AnswerLost if it may have arrived but no answer did.

        Without `answer_within`, the exchange as a whole takes at most
        HTTP_TIMEOUT_SECONDS. With it (a refresh), the answer is awaited while it keeps
        coming: `answer_within` seconds of silence at most, ANSWER_BOUND_SECONDS in all,
        so a body trickling in from a slow provider is taken. A provider's answer
        (a JSON success) cut short is AnswerUnusable: it acted. An answer over
        MAX_ANSWER_BYTES is not read further.
        """
        headers = {"Accept": "application/json", **headers}
        idle = HTTP_TIMEOUT_SECONDS if answer_within is None else answer_within
        bound = HTTP_TIMEOUT_SECONDS if answer_within is None else ANSWER_BOUND_SECONDS
        request = self._http.build_request(
            method,
            url,
            content=content,
            headers=headers,
            timeout=httpx2.Timeout(idle, connect=min(idle, HTTP_TIMEOUT_SECONDS)),
        )
        streamed: httpx2.Response | None = None
        try:
            async with asyncio.timeout(bound):
                streamed = await self._http.send(request, stream=True)
                try:
                    body = await read_bounded(streamed, what)
                finally:
                    await streamed.aclose()
        except TimeoutError:
            raise cut_short(streamed, what, f"no whole answer within {bound:g} s") from None
        except httpx2.HTTPError as error:
            unsent = isinstance(
                error, (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
            )
            if unsent:
                raise ProviderUnavailable(
                    f"the {what} request failed: {failure_reason(error)}"
                ) from None
            raise cut_short(streamed, what, failure_reason(error)) from None
        response = httpx2.Response(
            streamed.status_code, headers=streamed.headers, content=body, request=request
        )
        self._provider_clock.heard(response.headers.get("date"))
        if response.status_code == 504:  # a gateway gave up waiting: the provider may act on it
            raise AnswerLost(f"the {what} endpoint answered HTTP 504")
        if response.status_code >= 500:
            raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
        if response.status_code == 404 and what not in ("discovery", OAUTH_METADATA):
            self._endpoint_gone()
        return response


# -- what an answer means -----------------------------------------------------------------

PAGES = ("text/html", "application/xhtml+xml")  # what a middlebox shows a person


async def read_bounded(response: httpx2.Response, what: str) -> bytes:
    """The answer's body (decoded), refused once it is over MAX_ANSWER_BYTES.

    Refused as unusable when the provider answered (see from_the_provider), else as
    not answering usefully.
    """
    refusal = AnswerUnusable if from_the_provider(response) else ProviderUnavailable
    too_large = f"the {what} endpoint's answer is over {MAX_ANSWER_BYTES // 1024} KiB"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise refusal(too_large)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise refusal(too_large)
    return bytes(body)


def json_of(response: httpx2.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
    try:
        return json.loads(within_depth(response.content))
    except ValueError:
        raise (AnswerUnusable if from_the_provider(response) else ProviderUnavailable)(
            f"the {what} endpoint answered something that is not JSON"
            f" ({response.headers.get('content-type', 'no content type')!r:.60})"
        ) from None


def from_the_provider(response: httpx2.Response) -> bool:
    """Whether a success answer comes from the provider, which then acted on the request.

    OAuth endpoints answer JSON (RFC 6749 5.1). A success that is a page for a person
    (HTML, from a captive portal or a proxy) is taken as never having reached it, so a
    hotel's login page cannot put a refresh token in doubt. Any other success came from
    the endpoint's origin itself: redirects are not followed, and only loopback may be
    plain HTTP (elsewhere TLS vouches for the origin), so garbage of another type is the
    provider's own, after it acted.
    """
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return response.is_success and media_type not in PAGES


def cut_short(streamed: httpx2.Response | None, what: str, why: str) -> ProviderUnavailable:
    """An exchange that ended before its whole answer, by whether the provider had acted.

    Before the answer's head nobody can tell (AnswerLost); a success of the provider's
    own type that stops half-way was acted on (AnswerUnusable); any other answer never
    reached the provider, or was a refusal (ProviderUnavailable).
    """
    if streamed is None:
        return AnswerLost(f"the {what} request got no answer ({why})")
    cut = f"the {what} endpoint's answer stopped half-way ({why})"
    return AnswerUnusable(cut) if from_the_provider(streamed) else ProviderUnavailable(cut)


def oauth_error(response: httpx2.Response) -> OAuthError:
    try:
        body = json.loads(within_depth(response.content))
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error = body.get("error")
    description = body.get("error_description")
    unnamed = "invalid_client" if response.status_code == 401 else "invalid_request"  # RFC 6749 5.2
    challenges = ", ".join(response.headers.get_list("www-authenticate"))
    return OAuthError(
        error if isinstance(error, str) else unnamed,
        description if isinstance(description, str) else "",
        response.status_code,
        dpop_challenge=DPOP_CHALLENGE.search(challenges) is not None,
    )
