"""A forward's connections: whoever connects on a forward's socket is the app `forward:<name>`.

Through `ssh -R` every remote process reaches the socket as the local ssh client; from
a container or a sandbox, as a process whose program says nothing about who runs it.
So the peer does not identify itself here: the socket does, and its policy is the one
the person chose when opening it (`ForwardGrant`). What the kernel says of the peer
(uid, pid, the program where it can be read) is kept as a hint for the audit only.

Who may connect (`forward_uids`): the user's own uid (the ssh client, a rootless
container, a Flatpak) and root. Root already reads the user's keyring and the daemon's
memory, so refusing it protects nothing, while a rootful container's processes run as
root. Any other uid is closed before a byte is read, as on the main socket.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...session.accounts.records import Entitlement

ROOT_UID = 0


def forward_uids(owner_uid: int) -> frozenset[int]:
    """The uids a forward's socket admits: the daemon's user, and root."""
    return frozenset({owner_uid, ROOT_UID})


@dataclass(frozen=True, slots=True)
class ForwardGrant:
    """What a forward lets through, fixed when it is opened."""

    name: str
    accounts: frozenset[str] | None  # account ids; None: every account
    scopes: frozenset[str] | None = None  # at most these (down-scoped); None: the sign-in's
    audience: str = ""  # every token's audience (RFC 8707); "" for none
    id_token: bool = False  # may give the ID token when asked (never by default)
    confirm: bool = False  # each connection's first request waits for the person's answer

    @property
    def app(self) -> str:
        """The app every connection on the forward is, in the policy's and audit's words."""
        return f"forward:{self.name}"

    @property
    def entitlement(self) -> Entitlement:
        """What a connection on the forward may see and get."""
        return Entitlement(self.accounts, self.scopes, self.id_token, self.audience)


class ForwardConnection:
    """One connection on a forward: its grant, and whether the person let it in yet."""

    def __init__(self, grant: ForwardGrant) -> None:
        self.grant = grant
        self.confirmed = not grant.confirm
