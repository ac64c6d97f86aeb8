"""Checks of what callers and settings name: account ids, scopes, token lifetimes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from ..identities import PROVIDER_ALIAS, AccountId
from .step_up import StepUp

# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}")
MAX_SCOPES = 64
# Any id a sub of up to 255 characters makes: 12 characters each percent-encoded
# (identities.AccountId), an alias, a workspace and the form's own words.
MAX_ACCOUNT_ID_LENGTH = 4096
MAX_MIN_TTL_SECONDS = 86_400


def check_scope(scope: str) -> str:
    """Return scope if it is a valid OAuth scope token; else raise ValueError."""
    if not SCOPE_TOKEN.fullmatch(scope):
        shown = scope if len(scope) <= 40 else scope[:40] + "..."
        raise ValueError(f"{shown!r} is not a valid OAuth scope")
    return scope


def check_provider(alias: str) -> str:
    """A provider as callers name it: empty (the default one), `main`, or a table's alias."""
    if alias and not PROVIDER_ALIAS.fullmatch(alias):
        shown = alias if len(alias) <= 40 else alias[:40] + "..."
        raise ValueError(
            f"{shown!r} is not a provider alias (up to 32 lower-case letters, digits, - or _)"
        )
    return alias


def check_scopes(scopes: Sequence[str]) -> tuple[str, ...]:
    """Valid, de-duplicated scopes in their given order; ValueError names the first bad one."""
    if len(scopes) > MAX_SCOPES:
        raise ValueError(f"at most {MAX_SCOPES} scopes may be requested, not {len(scopes)}")
    return tuple(dict.fromkeys(check_scope(scope) for scope in scopes))


def check_audience(audience: str) -> str:
    """An RFC 8707 resource: empty, or an absolute URI without a fragment."""
    if not audience:
        return audience
    parts = urlsplit(audience)
    if len(audience) > 2048 or not parts.scheme or not parts.netloc or parts.fragment:
        raise ValueError("audience must be an absolute URI without a fragment (RFC 8707)")
    return audience


_DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_ORIGIN_LENGTH = 512
MAX_ORIGINS = 64


def check_origin(origin: str) -> str:
    """A web origin as browsers serialise it (RFC 6454): scheme://host[:port], http(s) only.

    The scheme and host are lower-cased and a default port left out, so that a policy's
    `https://App.example.com:443` and a browser's `https://app.example.com` are one origin.
    """
    parts = urlsplit(origin)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        len(origin) > MAX_ORIGIN_LENGTH
        or parts.scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or port == -1
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or not origin.isascii()
        or not origin.isprintable()
    ):
        shown = origin if len(origin) <= 80 else origin[:80] + "..."
        raise ValueError(f"{shown!r} is not a web origin (https://host or http://host:port)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        host += f":{port}"
    return f"{parts.scheme}://{host.lower()}"


def check_origins(origins: Sequence[str]) -> tuple[str, ...]:
    """Valid, de-duplicated origins in their given order; ValueError names the first bad one."""
    if len(origins) > MAX_ORIGINS:
        raise ValueError(f"at most {MAX_ORIGINS} origins, not {len(origins)}")
    return tuple(dict.fromkeys(check_origin(origin) for origin in origins))


HTTP_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}")  # an RFC 9110 token
MAX_URL_LENGTH = 4096


def check_http_method(method: str) -> str:
    """The method of a request a DPoP proof is for: an HTTP token such as GET."""
    if not HTTP_METHOD.fullmatch(method):
        raise ValueError("method must be an HTTP method such as GET or POST (1 to 32 characters)")
    return method


def check_request_url(url: str) -> str:
    """The URL of a request a DPoP proof is for: absolute http(s), no fragment, bounded."""
    parts = urlsplit(url) if url.isascii() and url.isprintable() and " " not in url else None
    if (
        parts is None
        or len(url) > MAX_URL_LENGTH
        or parts.scheme.lower() not in ("http", "https")
        or not parts.hostname
        or "#" in url
    ):
        raise ValueError(
            f"url must be an absolute http:// or https:// URL of at most {MAX_URL_LENGTH}"
            " characters, without a fragment"
        )
    return url


WORKSPACE_ID = re.compile(r"[0-9]{1,18}")


def check_workspace_id(workspace_id: str) -> str:
    """A workspace id (a BIGINT, docs/contract.md §10): empty, or 1 to 18 decimal digits."""
    if workspace_id and not WORKSPACE_ID.fullmatch(workspace_id):
        raise ValueError("workspace_id must be a decimal number of at most 18 digits")
    return workspace_id


# Authorize parameters the daemon sets itself, or that would send the answer elsewhere.
RESERVED_AUTHORIZE_PARAMS = frozenset(
    {
        "client_id", "redirect_uri", "response_type", "response_mode", "scope", "state",
        "nonce", "code_challenge", "code_challenge_method", "request", "request_uri",
        "workspace_id",
    }
)  # fmt: skip
AUTHORIZE_PARAM_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
PROMPT_VALUES = frozenset({"none", "login", "consent", "select_account"})
MAX_AUTHORIZE_PARAMS = 16
MAX_AUTHORIZE_VALUE_LENGTH = 512


def check_authorize_params(params: Mapping[str, str]) -> dict[str, str]:
    """Extra authorize parameters of a browser sign-in (login_hint, prompt, ...), checked.

    OpenID Connect Core 3.1.2.1 names the common ones; a provider may define its own.
    Those the daemon sets itself are refused rather than silently overridden.
    """
    if len(params) > MAX_AUTHORIZE_PARAMS:
        raise ValueError(f"at most {MAX_AUTHORIZE_PARAMS} authorize parameters")
    for name, value in params.items():
        if not AUTHORIZE_PARAM_NAME.fullmatch(name):
            raise ValueError(f"authorize parameter names are lower-case words, not {name[:64]!r}")
        if name in RESERVED_AUTHORIZE_PARAMS:
            raise ValueError(f"the daemon sets {name} itself; it cannot be given")
        if len(value) > MAX_AUTHORIZE_VALUE_LENGTH or not value.isprintable():
            raise ValueError(
                f"{name} must be at most {MAX_AUTHORIZE_VALUE_LENGTH} printable characters"
            )
        if name == "prompt" and not set(value.split()) <= PROMPT_VALUES:
            raise ValueError(f"prompt must be some of {', '.join(sorted(PROMPT_VALUES))}")
        if name == "max_age" and not (value.isascii() and value.isdigit()):
            raise ValueError("max_age must be a whole number of seconds")
    return dict(params)


# RFC 9470 section 3 and OpenID Connect Core: acr_values is space-separated, each value
# a StringOrURI; the printable ASCII without space, quote and backslash a challenge
# header can carry in its quoted-string.
ACR_VALUE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}")
MAX_ACR_VALUES = 16
MAX_MAX_AGE_SECONDS = 2**31 - 1


def check_step_up(acr_values: str, max_age: int | None) -> StepUp:
    """A token request's step-up (RFC 9470): acr values in their order, de-duplicated, and max_age.

    The values are split on spaces as in OpenID Connect's acr_values, each matched
    exactly later; a value that cannot be one is refused rather than dropped.
    """
    values = tuple(dict.fromkeys(value for value in acr_values.split(" ") if value))
    if len(values) > MAX_ACR_VALUES:
        raise ValueError(f"at most {MAX_ACR_VALUES} acr_values, not {len(values)}")
    for value in values:
        if not ACR_VALUE.fullmatch(value):
            shown = value if len(value) <= 40 else value[:40] + "..."
            raise ValueError(
                f"{shown!r} is not an acr value: acr_values are separated by spaces, each of"
                " printable ASCII without quotes or backslashes"
            )
    if max_age is not None and not 0 <= max_age <= MAX_MAX_AGE_SECONDS:
        raise ValueError(f"max_age_seconds must be between 0 and {MAX_MAX_AGE_SECONDS}")
    return StepUp(values, max_age)


# An account id, or what is meant as one: `user:...`, `<alias>/user:...`, in any case.
ID_LIKE = re.compile(r"(?:[^/@\s]*/)?user:", re.IGNORECASE)
# An alias of the person's choosing: short, lower-case, and never an id, an e-mail or a sub.
ALIAS = re.compile(r"[a-z0-9][a-z0-9._-]{0,31}")
MAX_ALIASES = 64


def check_account(account: str) -> str:
    """An account as callers name it: empty (the default), an id, an alias, an e-mail or a login.

    An id (or what looks like one) must have the form every store accepts
    (store.tenants), so an id let in here is never refused deeper down, where the
    refusal would be an internal error. Any other printable name is looked up among
    the accounts the caller may see (session.accounts.names).
    """
    if len(account) > MAX_ACCOUNT_ID_LENGTH or not account.isprintable():
        raise ValueError(f"account must be at most {MAX_ACCOUNT_ID_LENGTH} printable characters")
    if ID_LIKE.match(account):
        try:
            AccountId.parse(account)
        except ValueError:
            raise ValueError(
                "account must be empty (the default account), an id such as user:1001"
                " or user:1001:workspace:7, or an account's e-mail, login or alias"
                " (see `signin-broker accounts`)"
            ) from None
    return account


def check_alias(alias: str) -> str:
    """An alias a person gives an account: short, and never mistaken for an id, e-mail or sub."""
    if not ALIAS.fullmatch(alias) or alias.isdigit():
        shown = alias if len(alias) <= 40 else alias[:40] + "..."
        raise ValueError(
            f"{shown!r} cannot be an alias: an alias is 1 to 32 lower-case letters, digits,"
            " '.', '-' or '_', starting with a letter or digit and not only digits (so it"
            " is never taken for an account id, an e-mail or a user's sub)"
        )
    return alias
