"""The person and the admin of a staging provider, as the conformance hooks a user would write.

`python staging_hooks.py login URL` signs the stub's user 1001 in at the consent page the
authorize URL shows, and prints the address the provider sends the browser back to.
`approve VERIFICATION_URI USER_CODE` approves a device code at the verification page as
user 1001. `revoke ISSUER SUB` revokes a user at the stub's admin API, with the token
from STAGING_ADMIN_TOKEN. `fail` prints a made-up secret and exits 3.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import parse_qsl, urlsplit

import httpx2

SUB = "1001"
MADE_UP_SECRET = "hook-output-secret-7f3a"


def login(authorize_url: str) -> int:
    """Press the consent page's "Sign in as" button: the request posted back, plus `sub`."""
    parts = urlsplit(authorize_url)
    page = httpx2.get(authorize_url, timeout=15)
    if page.status_code != 200 or 'name="sub"' not in page.text:
        print(f"no consent page at the authorize URL ({page.status_code})", file=sys.stderr)
        return 1
    form = [*parse_qsl(parts.query), ("sub", SUB)]
    endpoint = f"{parts.scheme}://{parts.netloc}{parts.path}"
    answer = httpx2.post(endpoint, data=dict(form), timeout=15)
    print(answer.headers.get("location", ""))
    return 0 if answer.status_code in (302, 303) else 1


def approve(verification_uri: str, user_code: str) -> int:
    """Type the code into the verification page and press "Sign in as"."""
    answer = httpx2.post(verification_uri, data={"user_code": user_code, "sub": SUB}, timeout=15)
    return 0 if answer.status_code == 200 and "Device signed in" in answer.text else 1


def revoke(issuer: str, sub: str) -> int:
    """The stub's admin API, called the way this staging provider's admin wants it."""
    parts = urlsplit(issuer)
    answer = httpx2.post(
        f"{parts.scheme}://{parts.netloc}/admin/revoke",
        data={"sub": sub},
        headers={"Authorization": f"Bearer {os.environ['STAGING_ADMIN_TOKEN']}"},
        timeout=15,
    )
    return 0 if answer.status_code == 200 else 1


def fail() -> int:
    """A hook that breaks, saying something it must not be quoted on."""
    print(MADE_UP_SECRET)
    print(MADE_UP_SECRET, file=sys.stderr)
    return 3


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    sys.exit(
        {"login": login, "approve": approve, "revoke": revoke, "fail": fail}[command](*arguments)
    )
