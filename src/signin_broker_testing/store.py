"""The stub's memory: users, clients, codes, device codes, tokens, requests and injected faults.

Faults are queued token failures and delays, denied authorizations and an ongoing outage.
The web app runs on its own thread and a test calls the admin methods from another,
so every change happens under one lock.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from .keys import SigningKeys
from .ledger import SecretLedger
from .models import RecordedRequest, StubClient, StubUser
from .records import AuthorizationCode, DeviceAuthorization, DevicePoll, IssuedToken

AUTHORIZATION_CODE_SECONDS = 60
MAX_RECORDED_REQUESTS = 10_000  # a long demo run must not grow without end
OUTAGE_MODES = ("stopped", "http_500", "stall", "garbage")
SLOW_DOWN_SECONDS = 5  # RFC 8628 section 3.5: what each slow_down adds to the interval
NOT_A_LETTER = re.compile("[^A-Z]")


@dataclass(frozen=True, slots=True)
class TokenFailure:
    """An injected token endpoint failure."""

    status: int
    error: str


@dataclass(frozen=True, slots=True)
class TokenDelay:
    """An injected wait at the token endpoint, before or after the request is acted on."""

    seconds: float
    after_processing: bool


@dataclass(frozen=True, slots=True)
class BrokenAnswer:
    """A token answer broken on purpose (testing.broken_answers), after acting on the request."""

    how: str
    seconds: float  # how long a trickled answer takes


@dataclass(frozen=True, slots=True)
class Outage:
    """A simulated provider failure, one of OUTAGE_MODES, that lasts until it is lifted."""

    mode: str
    stall_seconds: float


class StubStore:
    """Thread-safe in-memory state of one stub provider: requests, codes, tokens and the rest."""

    def __init__(
        self,
        users: Iterable[StubUser],
        clients: Iterable[StubClient],
        *,
        reuse_ends_grant: bool = False,
    ) -> None:
        self.users = {user.sub: user for user in users}
        self.clients = {client.client_id: client for client in clients}
        self.keys = SigningKeys()
        self._lock = threading.Lock()
        self._codes: dict[str, AuthorizationCode] = {}
        self._by_access: dict[str, IssuedToken] = {}
        self._by_refresh: dict[str, IssuedToken] = {}
        self._requests: deque[RecordedRequest] = deque(maxlen=MAX_RECORDED_REQUESTS)
        # RFC 9700 4.14.2: a rotated refresh token presented again ends its whole grant.
        self.reuse_ends_grant = reuse_ends_grant
        self.reuses: list[str] = []  # the subs whose grants a reused refresh token ended
        self.devices = StubDeviceCodes()
        self.faults = StubFaults()
        self._assertions: dict[tuple[str, str], float] = {}  # (client, jti): until when kept
        for client in self.clients.values():
            SecretLedger.note(client.client_secret)

    def record(self, request: RecordedRequest) -> None:
        """Remember a request."""
        with self._lock:
            self._requests.append(request)

    def recorded(self) -> list[RecordedRequest]:
        """A copy of the recorded requests, oldest first."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self._requests.clear()

    def save_code(self, code: AuthorizationCode) -> None:
        """Keep a new authorization code until it is redeemed or expires."""
        SecretLedger.note(code.code)
        now = time.time()
        with self._lock:
            for stale in [key for key, held in self._codes.items() if held.expires_at <= now]:
                del self._codes[stale]
            self._codes[code.code] = code

    def redeem_code(self, code: str, client_id: str) -> AuthorizationCode | None:
        """Take a code out for good: any redemption, even a failing one, uses it up."""
        with self._lock:
            held = self._codes.pop(code, None)
        if held is None or held.client_id != client_id or held.expires_at <= time.time():
            return None
        return held

    def save_token(self, token: IssuedToken) -> None:
        """Remember an issued access and refresh token."""
        SecretLedger.note(token.access_token, token.refresh_token)
        with self._lock:
            self._by_access[token.access_token] = token
            if token.refresh_token:
                self._by_refresh[token.refresh_token] = token

    def by_access_token(self, access_token: str) -> IssuedToken | None:
        """The record of an access token, revoked or not."""
        with self._lock:
            return self._by_access.get(access_token)

    def by_refresh_token(self, refresh_token: str) -> IssuedToken | None:
        """The record of a refresh token, revoked or not."""
        with self._lock:
            return self._by_refresh.get(refresh_token)

    def alias_access_token(self, issued: str, alias: str) -> None:
        """Take `alias` for the access token `issued` from now on (a huge one, say)."""
        with self._lock:
            self._by_access[alias] = self._by_access[issued]

    def access_token_info(self, access_token: str) -> dict[str, object] | None:
        """What is known about an access token, for tests; None if it was never issued."""
        with self._lock:
            token = self._by_access.get(access_token)
            if token is None:
                return None
            return {
                "sub": token.sub,
                "scope": token.scope,
                "audience": token.audience,
                "expires_at": token.expires_at,
                "acr": token.acr,
                "active": not (token.access_revoked or token.is_expired()),
            }

    def revoke_refresh_token(self, token: IssuedToken) -> None:
        """End a refresh token (after rotation); its access token lives on until it expires."""
        with self._lock:
            token.refresh_revoked = True

    def revoke_access_token(self, token: IssuedToken) -> None:
        """End an access token; its refresh token still works."""
        with self._lock:
            token.access_revoked = True

    def revoke_grant(self, token: IssuedToken) -> None:
        """End an access token and its refresh token together."""
        with self._lock:
            token.access_revoked = token.refresh_revoked = True

    def revoke_user(self, sub: str) -> int:
        """End every token, pending code and unredeemed device approval of a user.

        Returns how many grants (token pairs) it ended; a device approval becomes a denial.
        """
        with self._lock:
            for code in [key for key, held in self._codes.items() if held.sub == sub]:
                del self._codes[code]
            self.devices.deny_approved(sub)
            ended = 0
            for token in self._by_access.values():
                if token.sub == sub and not (token.access_revoked and token.refresh_revoked):
                    token.access_revoked = token.refresh_revoked = True
                    ended += 1
            return ended

    def refresh_reused(self, token: IssuedToken) -> None:
        """A spent refresh token came back: with reuse detection, its whole grant ends."""
        if not self.reuse_ends_grant:
            return
        with self._lock:
            self.reuses.append(token.sub)
            for issued in self._by_access.values():
                if issued.sub == token.sub and issued.client_id == token.client_id:
                    issued.access_revoked = issued.refresh_revoked = True

    def first_use_of_assertion(self, client_id: str, jti: str, expires_at: object) -> bool:
        """Whether a client assertion's jti is new; it is kept until the assertion expires."""
        now = time.time()
        until = float(expires_at) if isinstance(expires_at, int | float) else now
        with self._lock:
            for stale in [key for key, kept in self._assertions.items() if kept < now]:
                del self._assertions[stale]
            if (client_id, jti) in self._assertions:
                return False
            self._assertions[client_id, jti] = max(until, now)
            return True


class StubFaults:
    """The failures a test queued for the stub: refusals, delays, broken answers, outages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token_failures: deque[TokenFailure] = deque()
        self._token_delays: deque[TokenDelay] = deque()
        self._broken_answers: deque[BrokenAnswer] = deque()
        self._outage: Outage | None = None
        self._denials = 0

    def fail_token_requests(self, failure: TokenFailure, times: int) -> None:
        """Make the next `times` token requests fail (after any failures already queued)."""
        with self._lock:
            self._token_failures.extend([failure] * times)

    def next_token_failure(self) -> TokenFailure | None:
        """The failure for this token request, if one is queued."""
        with self._lock:
            return self._token_failures.popleft() if self._token_failures else None

    def break_token_answers(self, broken: BrokenAnswer, times: int) -> None:
        """Break the next `times` token answers (after any already queued)."""
        with self._lock:
            self._broken_answers.extend([broken] * times)

    def next_broken_answer(self) -> BrokenAnswer | None:
        """How to break this token answer, if one is queued."""
        with self._lock:
            return self._broken_answers.popleft() if self._broken_answers else None

    def delay_token_requests(self, delay: TokenDelay, times: int) -> None:
        """Make the next `times` token requests wait (after any delays already queued)."""
        with self._lock:
            self._token_delays.extend([delay] * times)

    def next_token_delay(self) -> TokenDelay | None:
        """The delay for this token request, if one is queued."""
        with self._lock:
            return self._token_delays.popleft() if self._token_delays else None

    def set_outage(self, outage: Outage | None) -> None:
        """Start, change or (with None) end the outage."""
        with self._lock:
            self._outage = outage

    def outage(self) -> Outage | None:
        """The ongoing outage, if any."""
        with self._lock:
            return self._outage

    def deny_next_authorization(self) -> None:
        """Make one more authorization request end in access_denied."""
        with self._lock:
            self._denials += 1

    def take_denial(self) -> bool:
        """Whether this authorization request is to be denied."""
        with self._lock:
            if self._denials == 0:
                return False
            self._denials -= 1
            return True


class StubDeviceCodes:
    """The device authorizations (RFC 8628) the stub issued, by device code and by user code."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._devices: dict[str, DeviceAuthorization] = {}  # by device code
        self._by_user_code: dict[str, DeviceAuthorization] = {}  # by user_code_key()

    def save(self, device: DeviceAuthorization) -> None:
        """Keep a device authorization, for its polls and for tests asking after it later."""
        SecretLedger.note(device.device_code)
        with self._lock:
            self._devices[device.device_code] = device
            self._by_user_code[user_code_key(device.user_code)] = device

    def by_code(self, device_code: str) -> DeviceAuthorization | None:
        """The device authorization of a device code, whatever became of it."""
        with self._lock:
            return self._devices.get(device_code)

    def settle(self, user_code: str, user: StubUser | None) -> bool:
        """Approve a pending device authorization as `user`, or deny it; True if approved.

        `user` None denies it, and so does a user who is not a member of the workspace it
        named, as at the authorization endpoint. KeyError for an unknown user code;
        ValueError when it is no longer pending (approved, denied, redeemed or expired).
        """
        with self._lock:
            device = self._device(user_code)
            if device.state != "pending" or device.is_expired():
                status = "expired" if device.is_expired() else device.state
                raise ValueError(
                    f"the device sign-in {device.user_code} is {status}, no longer pending"
                )
            if user is None or (
                device.workspace_id is not None and device.workspace_id not in user.workspaces
            ):
                device.state = "denied"
                return False
            device.state, device.sub, device.approved_at = "approved", user.sub, int(time.time())
            return True

    def poll(self, device: DeviceAuthorization, now: float) -> DevicePoll:
        """Note a token request for `device` at monotonic time `now`, and settle its answer.

        The checks follow authlib's order (expiry, then the user's decision, then the pace),
        except that a slow_down asked for by a test comes before an approval. The approval
        is redeemed here, so of two racing polls only one gets the tokens.
        """
        with self._lock:
            too_fast = bool(device.polls) and now - device.polls[-1] < device.interval
            device.polls.append(now)
            if too_fast:
                device.too_fast += 1
            if device.state == "redeemed":
                return "redeemed"
            if device.is_expired():
                return "expired"
            if device.state == "denied":
                return "denied"
            if device.slow_down_next or (too_fast and device.state == "pending"):
                device.slow_down_next = False
                device.interval += SLOW_DOWN_SECONDS
                return "slow_down"
            if device.state == "approved":
                device.state = "redeemed"
                return "approved"
            return "pending"

    def spend_approved(self, device: DeviceAuthorization) -> None:
        """Use up an approved device code without tokens (a refusal that spends it)."""
        with self._lock:
            if device.state == "approved":
                device.state = "redeemed"

    def expire(self, user_code: str) -> None:
        """Make a device code expire now; KeyError for an unknown user code."""
        with self._lock:
            self._device(user_code).expires_at = time.time()

    def slow_down_next_poll(self, user_code: str) -> None:
        """Make the next poll of a device code answer slow_down; KeyError if unknown."""
        with self._lock:
            self._device(user_code).slow_down_next = True

    def polls(self, user_code: str) -> list[float]:
        """The monotonic times of a device code's polls; KeyError for an unknown user code."""
        with self._lock:
            return list(self._device(user_code).polls)

    def polls_too_fast(self, user_code: str) -> int:
        """How many polls came sooner than the interval; KeyError for an unknown user code."""
        with self._lock:
            return self._device(user_code).too_fast

    def _device(self, user_code: str) -> DeviceAuthorization:
        """The device authorization of a user code, with the lock held."""
        device = self._by_user_code.get(user_code_key(user_code))
        if device is None:
            raise KeyError(f"no device authorization has the user code {user_code!r}")
        return device

    def deny_approved(self, sub: str) -> None:
        """Deny the approved, unredeemed device codes of a user whose sessions were revoked."""
        with self._lock:
            for device in self._devices.values():
                if device.sub == sub and device.state == "approved":
                    device.state = "denied"


def user_code_key(user_code: str) -> str:
    """A user code as looked up: case and dashes do not matter (RFC 8628 section 6.1)."""
    return NOT_A_LETTER.sub("", user_code.upper())
