"""Output: plain text for people (aligned tables, durations and times), JSON for scripts."""

from __future__ import annotations

import enum
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..client import Account, ProviderStatus, TokenFile
from ..client._record import Record


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, headers first."""
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]
    return "\n".join(lines)


def accounts_table(listed: Sequence[Account]) -> str:
    """The accounts as `signin-broker accounts` shows them, the default marked with "*"."""
    rows = [
        [
            ("* " if a.is_default else "  ") + a.id,
            a.display_name or "-",
            a.email or "-",
            a.username or "-",
            ", ".join(a.aliases) or "-",
            "service account" if a.service_account else a.workspace_id or "personal",
            moment(a.access_token_expires_at_unix),
        ]
        for a in listed
    ]
    header = ["  ACCOUNT", "NAME", "EMAIL", "LOGIN", "ALIASES", "WORKSPACE", "TOKEN EXPIRES"]
    return table(header, rows)


def shortened(text: str, width: int, keep: str = "start") -> str:
    """At most `width` characters, an ellipsis where some were cut (at the end, or the start)."""
    if len(text) <= width:
        return text
    return text[: width - 1] + "…" if keep == "start" else "…" + text[-(width - 1) :]


def key_values(pairs: Sequence[tuple[str, str]]) -> str:
    """Two columns: names padded to the longest, then values."""
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in pairs)


def duration(seconds: float) -> str:
    """A rough human duration: 45s, 3m 12s, 2h 5m, 3d 4h."""
    seconds = int(max(seconds, 0))
    for unit, size, smaller, smaller_size in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "m", 60),
        ("m", 60, "s", 1),
    ):
        if seconds >= size:
            rest = (seconds % size) // smaller_size
            return (
                f"{seconds // size}{unit} {rest}{smaller}" if rest else f"{seconds // size}{unit}"
            )
    return f"{seconds}s"


def moment(unix: int) -> str:
    """A local time with how far away it is, e.g. "14:03:10 (in 52m 3s)"."""
    if not unix:
        return "-"
    delta = unix - time.time()
    clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))
    return f"{clock} (in {duration(delta)})" if delta >= 0 else f"{clock} ({duration(-delta)} ago)"


def token_file_state(file: TokenFile) -> str:
    """A token file as status and the doctor say it: where, whose, its age and next write."""
    whose = file.account or "the default account"
    written = (
        f"written {duration(time.time() - file.written_at_unix)} ago"
        if file.written_at_unix
        else "not written"
    )
    then = f", next {moment(file.next_write_unix)}" if file.next_write_unix else ""
    trouble = f"; PROBLEM: {file.problem}" if file.problem else ""
    return f"{file.path} ({file.format} of {whose}): {written}{then}{trouble}"


def by_source(sources: Mapping[str, str]) -> str:
    """Which settings came from where: "issuer, client_id from /etc/xdg/...; scopes from ..."."""
    grouped: dict[str, list[str]] = {}
    for setting, source in sources.items():
        grouped.setdefault(source, []).append(setting)
    return "; ".join(f"{', '.join(names)} {source}" for source, names in grouped.items())


def provider_state(issuer: str, degraded_reason: str, last_contact_unix: int) -> str:
    """A provider as status shows it: its issuer, and whether and when it last answered."""
    contact = (
        f"last answered {duration(time.time() - last_contact_unix)} ago"
        if last_contact_unix
        else "not contacted yet"
    )
    return f"{issuer} ({'DEGRADED: ' + degraded_reason if degraded_reason else contact})"


def token_binding(bound_by: str) -> str:
    """How an account's tokens are sent, and why (RFC 9449): status and the doctor say it."""
    if bound_by == "provider":
        return (
            "DPoP-bound: the identity provider requires DPoP of this client (git, kubectl,"
            " docker and `token --format header` cannot send them; proofs come from"
            " `token --format dpop`, the SDK and the HTTP auths)"
        )
    if bound_by:
        return (
            "DPoP-bound: its provider's `dpop` setting asks for DPoP (git, kubectl, docker and"
            ' `token --format header` cannot send them; dpop = "if-required" gives Bearer'
            " tokens at the next sign-in)"
        )
    return "Bearer: any tool can send them"


def dpop_rows(
    providers: Sequence[ProviderStatus], accounts: Sequence[Account]
) -> list[tuple[str, str]]:
    """Status rows: the `dpop` setting of each provider, and each account's tokens."""
    several = len(providers) > 1
    rows = [
        ("dpop" + (f" of {p.alias or 'main'}" if several else ""), p.dpop + _requirement(p))
        for p in providers
        if p.dpop
    ]
    rows += [
        ("tokens" + (f" of {a.id}" if len(accounts) > 1 else ""), token_binding(a.dpop_bound_by))
        for a in accounts
    ]
    return rows


def jsonable(value: Any) -> Any:
    """A value as JSON can hold it: records as objects, enums as their values."""
    if isinstance(value, Record):
        return {name: jsonable(field) for name, field in value.as_dict().items()}
    if isinstance(value, Mapping):
        return {name: jsonable(field) for name, field in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def print_json(value: Any) -> int:
    """Print a value as JSON for scripts; the exit status 0."""
    json.dump(jsonable(value), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def remark(text: str) -> None:
    """A remark for the person on stderr, after the data printed on stdout so far.

    stdout is flushed first: in a pipe it is buffered, so a remark written at once
    went before the table it follows (`signin-broker apps 2>&1 | less`), and in a
    terminal it could land on the table's last line.
    """
    sys.stdout.flush()
    print(text, file=sys.stderr)


def _requirement(provider: ProviderStatus) -> str:
    """What a sign-in learned of the provider requiring DPoP: when, why, until when."""
    if not provider.dpop_required:
        return ""
    return (
        "; the provider requires DPoP of this client, as a sign-in learned at"
        f" {moment(provider.dpop_required_since_unix)}: {provider.dpop_required_reason};"
        f" kept until {moment(provider.dpop_required_until_unix)}, or until a sign-in"
        " succeeds without a proof or `signin-broker doctor --forget-dpop`"
    )
