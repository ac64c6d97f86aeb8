"""What a test does to the stub's device sign-ins (RFC 8628): approve, deny, expire, slow down."""

from __future__ import annotations

from .store import StubStore


class DeviceSignIns:
    """The device sign-in knobs of StubProvider (the user's side of the verification page)."""

    _store: StubStore
    auto_approve: str | None

    def approve_device(self, user_code: str, sub: str | None = None) -> None:
        """Approve a device sign-in as `sub` (None: the auto-approve user), as its page does.

        A user who is not a member of the workspace the device asked for is refused: the
        device is told access_denied. KeyError for an unknown user code; ValueError for an
        unknown sub, nobody to approve as, or a code no longer pending.
        """
        sub = self.auto_approve if sub is None else sub
        if sub is None:
            raise ValueError("nobody to approve as: pass a sub, or name one with approve_as()")
        user = self._store.users.get(sub)
        if user is None:
            raise ValueError(
                f"approve_device(..., {sub!r}) names none of the users {list(self._store.users)}"
            )
        self._store.devices.settle(user_code, user)

    def deny_device(self, user_code: str) -> None:
        """Deny a device sign-in: its next poll is told access_denied.

        KeyError for an unknown user code; ValueError when it is no longer pending.
        """
        self._store.devices.settle(user_code, None)

    def expire_device_code(self, user_code: str) -> None:
        """Make a device code expire now, so polls are told expired_token (KeyError if unknown)."""
        self._store.devices.expire(user_code)

    def slow_down_next_poll(self, user_code: str) -> None:
        """Make a device code's next poll answer slow_down, however slowly it came.

        Its interval grows by 5 s as with any slow_down; a denial or expiry still comes
        first, but an approval waits for the poll after. KeyError for an unknown user code.
        """
        self._store.devices.slow_down_next_poll(user_code)

    def device_polls(self, user_code: str) -> list[float]:
        """The time.monotonic() of each token request for a device code, oldest first.

        Requests answered by an injected failure or an outage never reach the grant, so
        they are not counted; token_requests() has them all. KeyError for an unknown code.
        """
        return self._store.devices.polls(user_code)

    def device_polls_too_fast(self, user_code: str) -> int:
        """How many polls of a device code came sooner than the interval then in force.

        Each is answered slow_down while the code is pending (KeyError for an unknown code).
        """
        return self._store.devices.polls_too_fast(user_code)
