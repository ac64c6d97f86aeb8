"""Which accounts an admitted call may see or use: the object-level half of the access table.

The access table (access.py) says which callers may call an RPC, as Django REST
framework's has_permission does for a view; this says, once, what a call it admitted
may do with the accounts and sign-ins it names, as has_object_permission does for an
object. The dispatch hands each handler its call as admitted (Admitted), and the
handler asks it of every account it touches; no handler looks at the kind of its
caller, and nothing but access.py and this module refuses one for its kind.

- A read or a token names an account the caller may see, or it is NOT_FOUND, as an
  account that does not exist is (the contract's 7.1): account_to_see.
- A change (a sign-out, the default, a removal, a sign-in again) names an account the
  caller may act on, or it is INVALID_ARGUMENT whether the account exists or not, so a
  write cannot probe for accounts either (T4): account_to_change.
- An app limited to some accounts signs in again only one of those, named, and the
  sign-in is taken only if it ends as that account: it never adds one (new_sign_in).
- A sign-in is the person's to begin, on this host: through a forward, a token request
  that needs a step-up is served once a sign-in meets it, never begins one.
- Rows and sign-ins of no account (the app policy's, the loopback page's) are for a
  caller that sees every account; a sign-in an app began, for that app.
- A call that lasts (a watch) sees what the caller may see at each moment: its policy
  is asked again (now).
- A forward's own answers are for a call through that forward (forward_grant).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace

from ...session.accounts.names import Naming
from ...session.accounts.records import Entitlement, owner_key
from ...session.errors import AccountNotFound
from ..callers.forwarded import ForwardGrant
from ..callers.identity import Caller
from ..refusals import AppDenied, NewAccountNotAllowed
from .messages import actor_of
from .statuses import InvalidRequest

Visibility = Callable[[Caller], Awaitable[Entitlement]]


@dataclass(frozen=True, slots=True)
class Admitted:
    """A call its RPC's entry let through: the verified caller, and what it may see and use.

    Made by the access table's guard (access.py) alone.
    """

    caller: Caller
    entitlement: Entitlement
    visibility: Visibility = field(repr=False)  # what the caller's policy lets it see, asked anew
    origin: str | None = None  # the web origin a browser extension's token request is for

    def account_to_see(self, named: str, names: Naming) -> str:
        """The id of the account a read or a token names ("": the default one).

        AccountNotFound when the caller may not see it, by any name, as when none exists.
        """
        account = names.account_id(named, self.entitlement)
        if account and not self.entitlement.sees(account):
            raise AccountNotFound
        return account

    def account_to_change(self, named: str, names: Naming) -> str:
        """The id of the account a change names ("": the default one).

        Naming an account the caller may not act on, by any name, is INVALID_ARGUMENT
        whether it exists or not (the contract's T4).
        """
        try:
            account = names.account_id(named, self.entitlement)
        except AccountNotFound:
            if self.entitlement.accounts is None:
                raise
            account = named  # no account it may see has this name: refused below
        if account and not self.entitlement.sees(account):
            raise InvalidRequest(f"{named} is not an account this app may act on")
        return account

    def new_sign_in(self, account: str) -> bool:
        """Whether a sign-in the caller begins for `account` is taken only as that account.

        NewAccountNotAllowed for a caller limited to some accounts that names none.
        """
        limited = self.entitlement.accounts is not None
        if limited and not account:
            raise NewAccountNotAllowed(
                "this app may sign in again only the accounts its policy lets it use; name one"
                " (`account`): a new account is added by the person (`signin-broker login`) or"
                " by an app allowed every account"
            )
        return limited

    @property
    def begins_sign_ins(self) -> bool:
        """Whether a token request that needs a stronger sign-in may begin one (not a forward's)."""
        return self.caller.forward is None

    @property
    def sees_every_account(self) -> bool:
        """Whether the caller sees every account: rows and sign-ins of no account too."""
        return self.entitlement.accounts is None

    def sees(self, account: str) -> bool:
        """Whether the caller may see and use the account."""
        return self.entitlement.sees(account)

    def sign_ins_followed(self, accounts: Iterable[str]) -> frozenset[str]:
        """The owner keys of the sign-ins the caller may follow: its own, and these accounts'.

        `accounts`: those the caller sees (the session's list for its entitlement).
        """
        return frozenset([*accounts, owner_key("", actor_of(self.caller).app)])

    async def now(self) -> Admitted:
        """The call as its caller's policy admits it at this moment, for a call that lasts.

        What it may see only: a watch is never refused or asked once it began.
        """
        return replace(self, entitlement=await self.visibility(self.caller))

    @property
    def forward_grant(self) -> ForwardGrant:
        """The grant of the forward the call came through; AppDenied for any other call."""
        if self.caller.forward is None:
            raise AppDenied("this answer is a forward's, for a call through it")
        return self.caller.forward.grant
