"""offline_access is asked for as OpenID Connect Core 11 requires: with prompt=consent."""

from __future__ import annotations

from signin_broker.oidc.code_flow import offline_consent


def test_offline_access_brings_prompt_consent() -> None:
    scopes = ("openid", "profile", "email", "offline_access")
    assert offline_consent(scopes, {}) == {"prompt": "consent"}
    assert offline_consent(scopes, {"login_hint": "a@example.com"}) == {
        "login_hint": "a@example.com",
        "prompt": "consent",
    }


def test_a_prompt_the_person_chose_is_kept() -> None:
    scopes = ("openid", "offline_access")
    assert offline_consent(scopes, {"prompt": "select_account"}) == {"prompt": "select_account"}


def test_without_offline_access_no_prompt_is_added() -> None:
    assert offline_consent(("openid", "profile"), {}) == {}
    assert offline_consent(("openid",), {"prompt": "login"}) == {"prompt": "login"}
