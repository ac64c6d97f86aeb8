"""One mapping from a provider's errors to the contract's error codes (section 6), for the
browser's callback and the device grant alike; an error that is not the provider's is a bug
and is not dressed up as one."""

from __future__ import annotations

import pytest

from signin_broker.oidc.errors import (
    AnswerLost,
    ClockSkewed,
    DeviceGrantEnded,
    IdTokenInvalid,
    OAuthError,
    ProviderMisfit,
    ProviderUnavailable,
    failure_of,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (OAuthError("invalid_grant", "", 400), "invalid_code"),
        (OAuthError("invalid_client", "bad secret", 401), "invalid_client"),
        (IdTokenInvalid("the id_token's nonce does not match"), "invalid_id_token"),
        (ClockSkewed("this device's clock is 2.0 hours behind"), "clock_skew"),
        (ProviderUnavailable("HTTP 503"), "provider_unavailable"),
        (AnswerLost("no answer"), "provider_unavailable"),
        (ProviderMisfit("the provider does not support PKCE with S256"), "provider_misconfigured"),
        (DeviceGrantEnded("access_denied", "the sign-in was denied"), "access_denied"),
        (DeviceGrantEnded("expired_token", "the code expired"), "expired_token"),
    ],
)
def test_each_provider_error_has_one_code_a_reason_and_a_sentence(
    error: Exception, code: str
) -> None:
    failure = failure_of(error)
    assert failure.error_code == code
    assert str(failure).startswith(f"{code}: ") and failure.reason
    assert failure.message[:1].isupper() and failure.message.endswith(".")


def test_what_the_person_reads_says_why_an_answer_was_not_valid() -> None:
    failure = failure_of(IdTokenInvalid("the identity provider did not confirm workspace 7"))
    assert "did not confirm workspace 7" in failure.message


def test_the_clients_own_credentials_refused_are_not_a_bad_code() -> None:
    assert "client_id, client_auth" in failure_of(OAuthError("invalid_client", "", 401)).message


def test_an_error_that_is_not_the_providers_is_not_mapped() -> None:
    with pytest.raises(TypeError):
        failure_of(KeyError("a bug"))
