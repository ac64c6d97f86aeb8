"""An account id is written and read one way, whatever the provider's sub holds.

OpenID Connect lets a sub be any 255 ASCII characters (Salesforce's is a URL); before,
such a sub made an id the stores refused, so the account could never be saved.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from signin_broker.identities import AccountId, AppId, AppKind
from signin_broker.session.accounts.records import account_id_of, provider_of
from signin_broker.session.validation import check_account
from signin_broker.store.tenants import tenant_key

SUBS = st.text(min_size=1, max_size=255)
ALIASES = st.sampled_from(["", "work", "home-2"])
WORKSPACES = st.sampled_from(["", "7", "123456789012345678"])


@given(SUBS, WORKSPACES, ALIASES)
def test_any_sub_makes_an_id_every_store_accepts_and_that_reads_back(
    sub: str, workspace: str, alias: str
) -> None:
    written = account_id_of(sub, workspace, alias)
    assert tenant_key(written) == written and check_account(written) == written
    assert AccountId.parse(written) == AccountId(sub, workspace, alias)
    assert provider_of(written) == alias


def test_a_url_sub_is_encoded_only_where_the_form_needs_it() -> None:
    written = account_id_of("https://login.salesforce.com/id/00D/005", "", "sf")
    assert written == "sf/user:https%3A//login.salesforce.com/id/00D/005"
    assert account_id_of("auth0|5f7c 8e") == "user:auth0|5f7c%208e"


@pytest.mark.parametrize(
    "existing", ["user:1001", "user:1001:workspace:7", "work/user:1001", "user:a/b"]
)
def test_ids_of_plain_subs_read_as_they_always_did(existing: str) -> None:
    assert str(AccountId.parse(existing)) == existing


@pytest.mark.parametrize(
    "malformed", ["", "1001", "user:", "user:a b", "Work/user:1", "user:1:workspace:", "user:1:x"]
)
def test_anything_else_is_not_an_account_id(malformed: str) -> None:
    with pytest.raises(ValueError, match="not an account id"):
        AccountId.parse(malformed)


@pytest.mark.parametrize(
    ("text", "kind", "name", "script"),
    [
        ("flatpak:org.example.App", AppKind.FLATPAK, "org.example.App", ""),
        ("snap:firefox", AppKind.SNAP, "firefox", ""),
        ("/usr/bin/gjs", AppKind.PROGRAM, "/usr/bin/gjs", ""),
        ("/usr/bin/python3 /home/a/app.py", AppKind.PROGRAM, "/usr/bin/python3", "/home/a/app.py"),
        ("/usr/bin/python3 -m tool", AppKind.PROGRAM, "/usr/bin/python3", "-m tool"),
        # A colon makes no sandbox: a path may hold one, an unknown kind is a program,
        # and a sandbox's id never has a script after it.
        ("/opt/a:b/bin/app", AppKind.PROGRAM, "/opt/a:b/bin/app", ""),
        ("docker:abc", AppKind.PROGRAM, "docker:abc", ""),
        ("flatpak:", AppKind.PROGRAM, "flatpak:", ""),
        ("flatpak:org.a.B /x.py", AppKind.PROGRAM, "flatpak:org.a.B", "/x.py"),
        ("", AppKind.PROGRAM, "", ""),
    ],
)
def test_an_app_id_is_read_one_way_and_written_back_as_it_was(
    text: str, kind: AppKind, name: str, script: str
) -> None:
    app = AppId.parse(text)
    assert (app.kind, app.name, app.script) == (kind, name, script)
    assert app.sandboxed == (kind is not AppKind.PROGRAM)
    assert str(app) == text
