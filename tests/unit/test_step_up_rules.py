"""Step-up (RFC 9470) in pieces: the request's check, what meets it, the record, the challenge."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signin_broker.client._challenges import step_up_of
from signin_broker.session.accounts.records import Account, AccountInfo, sign_in_facts
from signin_broker.session.step_up import CLOCK_LEEWAY_SECONDS, StepUp
from signin_broker.session.tokens import TokenSet
from signin_broker.session.validation import check_authorize_params, check_step_up

MFA, PWD = "urn:rig:mfa", "urn:rig:pwd"
NOW = 1_800_000_000.5


def test_acr_values_are_split_on_spaces_kept_in_order_and_checked() -> None:
    assert check_step_up(f" {MFA}  {PWD} {MFA}", None) == StepUp((MFA, PWD))
    assert check_step_up("", 0) == StepUp((), 0)
    assert not check_step_up("", None)
    for bad in ['a"b', "a\\b", "a\tb", "é", "x" * 257]:
        with pytest.raises(ValueError, match="not an acr value"):
            check_step_up(bad, None)
    with pytest.raises(ValueError, match="at most 16"):
        check_step_up(" ".join(f"v{n}" for n in range(17)), None)
    with pytest.raises(ValueError, match="max_age_seconds must be between"):
        check_step_up("", -1)
    with pytest.raises(ValueError, match="whole number"):
        check_authorize_params({"max_age": "5m"})


def test_a_sign_in_meets_a_step_up_by_exact_acr_and_by_auth_time() -> None:
    step_up = StepUp((MFA,), 300)
    assert step_up.unmet(MFA, int(NOW) - 300, NOW) == ""
    assert step_up.unmet("urn:rig:MFA", int(NOW), NOW) == "its acr is 'urn:rig:MFA'"  # exact
    assert step_up.unmet("", int(NOW), NOW) == "the identity provider named no acr for it"
    assert (
        step_up.unmet(MFA, int(NOW) - 301, NOW)
        == "the person authenticated 301 s before the request"
    )
    assert "no auth_time" in step_up.unmet(MFA, 0, NOW)
    # Only a sign-in made for the request gets leeway for the provider's clock.
    assert (
        step_up.unmet(MFA, int(NOW) - 300 - CLOCK_LEEWAY_SECONDS, NOW, CLOCK_LEEWAY_SECONDS) == ""
    )


def test_prompt_login_is_asked_only_when_the_acr_is_not_met() -> None:
    step_up = StepUp((MFA, PWD), 60)
    assert step_up.authorize_params(acr_unmet=True) == {
        "acr_values": f"{MFA} {PWD}",
        "max_age": "60",
        "prompt": "login",
    }
    assert step_up.authorize_params(acr_unmet=False) == {
        "acr_values": f"{MFA} {PWD}",
        "max_age": "60",
    }
    assert check_authorize_params(step_up.authorize_params(acr_unmet=True))  # the daemon's check
    # offline_access is granted only with prompt=consent (OIDC Core 11): a session that
    # holds it asks for consent too, or the stepped-up session would not be renewable.
    assert step_up.authorize_params(acr_unmet=True, offline=True)["prompt"] == "login consent"


def test_a_step_up_sign_in_of_another_user_or_short_of_it_is_refused() -> None:
    step_up = StepUp((MFA,))
    assert step_up.refusal("user:1001", NOW, "user:1001", MFA, int(NOW)) == ""
    assert "another user signed in (user:1002)" in step_up.refusal(
        "user:1001", NOW, "user:1002", MFA, int(NOW)
    )
    assert "its acr is 'urn:rig:pwd'; user:1001 keeps its session" in step_up.refusal(
        "user:1001", NOW, "user:1001", PWD, int(NOW)
    )


def test_the_sign_ins_acr_and_auth_time_are_kept_beside_the_account_across_restarts() -> None:
    tokens = TokenSet("at", "Bearer", ("openid",), 0.0, 3600.0)
    account = Account(AccountInfo("user:1001", "1001", acr=MFA, auth_time=1_700_000_000), tokens)
    record = account.to_record("https://issuer")
    assert "acr" not in record["account"]  # a daemon of an earlier version still reads it
    assert Account.from_record(record).info == account.info
    del record["sign_in"]  # a record from before step-up
    assert (Account.from_record(record).info.acr, Account.from_record(record).info.auth_time) == (
        "",
        0,
    )
    record["sign_in"] = {"acr": 7, "auth_time": "yesterday"}
    assert Account.from_record(record).info == replace(account.info, acr="", auth_time=0)


@pytest.mark.parametrize(
    ("claims", "facts"),
    [
        ({"acr": MFA, "auth_time": 1_700_000_000}, (MFA, 1_700_000_000)),
        ({"auth_time": 1_700_000_000.9}, ("", 1_700_000_000)),
        ({"acr": ["x"], "auth_time": True}, ("", 0)),
        ({"auth_time": float("inf")}, ("", 0)),
        ({"auth_time": -5}, ("", 0)),
    ],
)
def test_the_id_tokens_acr_and_auth_time_are_read_only_of_their_types(
    claims: dict[str, object], facts: tuple[str, int]
) -> None:
    assert sign_in_facts(claims) == facts


STEP_UP_401 = 'Bearer error="insufficient_user_authentication"'


@pytest.mark.parametrize(
    ("headers", "asked"),
    [
        (  # RFC 9470's own example
            [f'{STEP_UP_401}, error_description="A different authentication level is required",'
             ' acr_values="myACR"'],
            ("myACR", None),
        ),
        ([f"{STEP_UP_401}, max_age=5"], ("", 5)),
        ([f'{STEP_UP_401},acr_values="{MFA} {PWD}",max_age="60"'], (f"{MFA} {PWD}", 60)),
        (['Basic realm="a, b"', f'Negotiate abc==, {STEP_UP_401}, acr_values=x'], ("x", None)),
        (['bearer realm="r\\"q", ERROR=insufficient_user_authentication, Acr_Values=x'],
         ("x", None)),
        ([f'DPoP algs="ES256", {STEP_UP_401}, acr_values="{MFA}"'], (MFA, None)),
    ],
)  # fmt: skip
def test_a_step_up_challenge_is_read_by_the_challenge_grammar(
    headers: list[str], asked: tuple[str, int | None]
) -> None:
    assert step_up_of(headers) == asked


@pytest.mark.parametrize(
    "header",
    [
        'Bearer error="invalid_token"',
        STEP_UP_401,  # asks for nothing the broker could do
        f"{STEP_UP_401}, max_age=-1",
        f"{STEP_UP_401}, max_age=99999999999",
        f'{STEP_UP_401}, acr_values="a\\"b"',
        f'{STEP_UP_401} acr_values="x"',  # no comma between parameters
        f'{STEP_UP_401}, acr_values="x',  # an unterminated quoted-string
        f'Basic {STEP_UP_401}, acr_values="x"',
        f'{STEP_UP_401}, acr_values="x"' + " " * 9000,
        '"',
        "",
    ],
)
def test_no_step_up_is_read_from_another_challenge_or_a_broken_header(header: str) -> None:
    assert step_up_of([header]) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=' \t,="\\=abBeEr_rox9;', max_size=60), max_size=3))
def test_any_header_reads_as_a_step_up_or_none_without_an_error(headers: list[str]) -> None:
    found = step_up_of(headers)
    assert found is None or (isinstance(found[0], str) and (found[1] is None or found[1] >= 0))
