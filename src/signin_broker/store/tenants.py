"""Tenant keys: every stored record names its account, and a store refuses anything else.

A key is `user:<platform_user_id>` or `user:<platform_user_id>:workspace:<workspace_id>`
(docs/contract.md §10), prefixed with `<alias>/` for an account of a provider other than the
main one (`work/user:1001`): the same `sub` at two providers is two people. The
store's read and write helpers take one and fail closed on an empty or malformed key
(docs/contract.md §12): there is no unscoped read.
"""

from __future__ import annotations

from ..identities import AccountId


class MissingTenantKey(ValueError):
    """A scoped access without a well-formed tenant key: refused rather than run unscoped."""


def tenant_key(account: str) -> str:
    """The account's key when it is a well-formed tenant key; MissingTenantKey otherwise."""
    try:
        AccountId.parse(account)
    except ValueError:
        raise MissingTenantKey(
            f"{account!r} is not a tenant key ([<alias>/]user:<id>[:workspace:<id>]):"
            " no unscoped access"
        ) from None
    return account
