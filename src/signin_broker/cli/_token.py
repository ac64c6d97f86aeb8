"""`signin-broker token`: ask the daemon for a token and print it in the format asked for.

Most often run as `$(signin-broker token)`, once per shell command, so it runs as a
one-shot (cli/main.py reads its line without argparse: _flags.py) and asks on the JSON
path (_json_client.py); nothing it loads imports typing, re, json or argparse (json only
to indent `--json` for people, shlex only for `--format env`). The other commands reach
it through the command table, with argparse's namespace.
"""

from __future__ import annotations

import os
import sys
import time

from ._failures import EXIT_USAGE, Refused, complain
from ._flags import TokenArguments, shell_name
from ._json_client import SIGN_DPOP_PROOF, fetch
from ._json_codec import dumps, loads

TYPE_CHECKING = False  # not typing's: it would cost the one-shot about 5 ms
if TYPE_CHECKING:
    from typing import Any

# kubectl names the ExecCredential version it wants in KUBERNETES_EXEC_INFO.
EXEC_CREDENTIAL_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
HEADER_TOOL = "`--format header` (`--format dpop --method M --url U` can)"


def token(args: TokenArguments) -> int:
    """Ask the daemon for a token and print it in the format asked for."""
    form = "json" if args.json else args.format
    if form == "env" and not shell_name(args.env_name):
        complain(f"--env-name must be a shell variable name, not {args.env_name!r}")
        return EXIT_USAGE
    dpop_status = _dpop_path(args)
    if dpop_status is not None:
        return dpop_status
    version = ""
    if form == "exec-credential":
        try:
            version = exec_credential_version(os.environ.get("KUBERNETES_EXEC_INFO", ""))
        except ValueError as error:
            complain(str(error))
            return EXIT_USAGE
    step_up: dict[str, Any] = {"acr_values": args.acr_values}
    if args.max_age is not None:
        step_up["max_age_seconds"] = args.max_age
    try:
        tool = {"header": HEADER_TOOL, "exec-credential": "kubectl"}.get(form, "")
        issued = fetch(args, tool=tool, id_token=args.id_token, **step_up)
    except Refused as refusal:
        return refusal.status
    secret, expires = _presented(issued, args.id_token)
    if form == "json":
        shown = {
            "access_token": issued.get("access_token", ""),
            "token_type": issued.get("token_type", ""),
            "expires_at_unix": int(str(issued.get("expires_at_unix", 0))),
            "scopes": issued.get("scopes", []),
            "account": issued.get("account", ""),
            "acr": issued.get("acr", ""),
            "auth_time_unix": int(str(issued.get("auth_time_unix", 0))),
        }
        if args.id_token:
            shown |= {"id_token": secret, "id_token_expires_at_unix": expires}
        import json  # indented for people: the C codec writes compact JSON only

        json.dump(shown, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif form == "header":
        print(f"Authorization: Bearer {secret}")
    elif form == "env":
        import shlex

        print(f"export {args.env_name}={shlex.quote(secret)}")
    elif form == "exec-credential":
        print(dumps(exec_credential(version, secret, expires)))
    else:
        print(secret)
    return 0


def _dpop_path(args: TokenArguments) -> int | None:
    """--format dpop's exit status, or a usage error for its options without it; else None."""
    dpop = args.format == "dpop"
    if dpop:
        fits = bool(args.method and args.url) and not (args.id_token or args.acr_values)
        fits = fits and args.max_age is None
    else:
        fits = not (args.method or args.url or args.nonce)
    if not fits:
        complain(
            "--format dpop takes --method and --url (and --nonce), and they go with it only;"
            " it takes no --id-token, --acr-values or --max-age"
        )
        return EXIT_USAGE
    return _dpop_headers(args) if dpop else None


def _dpop_headers(args: TokenArguments) -> int:
    """Print a request's Authorization and DPoP header lines (--json: with the token's details)."""
    try:
        issued = fetch(
            args, call=SIGN_DPOP_PROOF, method=args.method, url=args.url, nonce=args.nonce
        )
    except Refused as refusal:
        return refusal.status
    authorization = f"{issued.get('token_type', '')} {issued.get('access_token', '')}"
    proof = str(issued.get("dpop", ""))
    if args.json:
        print(dumps({**issued, "authorization": authorization}))
        return 0
    print(f"Authorization: {authorization}")
    if proof:
        print(f"DPoP: {proof}")
    return 0


def _presented(issued: dict[str, object], id_token: bool) -> tuple[str, int]:
    """The secret to hand on (the access token, or the ID token) and when it expires."""
    if id_token:
        return str(issued.get("id_token", "")), int(str(issued.get("id_token_expires_at_unix", 0)))
    return str(issued.get("access_token", "")), int(str(issued.get("expires_at_unix", 0)))


def exec_credential_version(exec_info: str) -> str:
    """The ExecCredential apiVersion kubectl asks for (KUBERNETES_EXEC_INFO), v1 by default."""
    if not exec_info:
        return EXEC_CREDENTIAL_VERSIONS[0]
    try:
        asked = loads(exec_info).get("apiVersion", "")
    except (ValueError, AttributeError):
        raise ValueError("KUBERNETES_EXEC_INFO is not a JSON object") from None
    if asked not in EXEC_CREDENTIAL_VERSIONS:
        raise ValueError(
            f"kubectl asks for ExecCredential {asked!r}; this knows"
            f" {' and '.join(EXEC_CREDENTIAL_VERSIONS)}"
        )
    return str(asked)


def exec_credential(version: str, secret: str, expires_at: int) -> dict[str, object]:
    """A Kubernetes ExecCredential carrying the token and its expiry (RFC 3339, UTC)."""
    status: dict[str, object] = {"token": secret}
    if expires_at:
        status["expirationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
    return {"apiVersion": version, "kind": "ExecCredential", "status": status}
