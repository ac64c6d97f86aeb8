"""The SDK's results read every field of the API's messages, and its enums are the API's."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from signin_broker.client import (
    Account,
    AppDecision,
    Caller,
    Event,
    EventKind,
    ProviderStatus,
    SignInStart,
    SignInState,
    Status,
    TokenRevocation,
    _models,
)
from signin_broker.daemon.api import messages
from signin_broker.session.accounts import events, overview
from signin_broker.v1 import broker_pb2 as pb

# Fields of a message its model does not read by name, and why.
NOT_READ_BY_NAME = {
    "signin_broker.v1.BeginSignInResponse": {
        "sign_in_url",  # SignInStart.url
        "method",  # SignInStart.device
        "verification_uri_complete",  # the daemon puts it in sign_in_url
    },
    "signin_broker.v1.GetStatusResponse": {"default_account_detail"},  # Status.default
}


@pytest.mark.parametrize("model", list(_models._MODELS.values()), ids=lambda m: m.__name__)
def test_every_field_of_a_message_reaches_its_model(model: type[_models.Model]) -> None:
    """A field the API gains fails here until the SDK exposes it (or says why not)."""
    message = model._message.DESCRIPTOR
    unread = set(message.fields_by_name) - set(model._fields)
    assert unread == NOT_READ_BY_NAME.get(message.full_name, set())
    model.from_proto(model._message())  # every field has a source


def test_a_model_field_without_a_source_is_refused() -> None:
    class Stray(_models.Model, message=pb.GetSignInQrResponse):  # no model reads it
        media_type: str
        png: bytes

    try:
        with pytest.raises(TypeError, match=r"Stray\.png: no field of that name"):
            Stray.from_proto(pb.GetSignInQrResponse(media_type="image/png"))
    finally:
        del _models._MODELS["signin_broker.v1.GetSignInQrResponse"]


def test_status_reads_nested_repeated_optional_and_enum_fields() -> None:
    message = pb.GetStatusResponse(
        version="1.2",
        issuer="https://id.example",
        sign_in_state=pb.SIGN_IN_STATE_SIGNED_IN,
        caller=pb.Caller(uid=1000, gid=1000, pid=42, executable="/usr/bin/python3"),
        providers=[
            pb.Provider(alias="", issuer="https://id.example", is_default=True),
            pb.Provider(
                alias="work",
                issuer="https://work.example",
                degraded_reason="timeout",
                last_contact_unix=7,
                client_id="broker",
                device_client_id="broker-tv",
            ),
        ],
    )
    status = Status.from_proto(message)
    assert status.sign_in_state is SignInState.SIGNED_IN
    assert status.caller == Caller(1000, 1000, 42, "/usr/bin/python3")
    assert status.default is None
    assert status.providers == (
        ProviderStatus("", "https://id.example", True, "", 0, "", ""),
        ProviderStatus("work", "https://work.example", False, "timeout", 7, "broker", "broker-tv"),
    )

    message.default_account_detail.CopyFrom(pb.Account(id="work/user:1", provider="work"))
    default = Status.from_proto(message).default
    assert default == Account("work/user:1", "", "", "", "", False, 0, 0, provider="work")


def test_fields_read_from_elsewhere() -> None:
    device = SignInStart.from_proto(
        pb.BeginSignInResponse(
            sign_in_id="s1",
            sign_in_url="https://id/device?code=AB",
            method=pb.SIGN_IN_METHOD_DEVICE_CODE,
        )
    )
    assert (device.url, device.device) == ("https://id/device?code=AB", True)
    browser = SignInStart.from_proto(pb.BeginSignInResponse(method=pb.SIGN_IN_METHOD_BROWSER))
    assert browser.device is False


def test_enum_values_newer_than_the_sdk_read_as_unspecified() -> None:
    event = Event.from_proto(
        pb.WatchEventsResponse(kind=99, sign_in_state=pb.SIGN_IN_STATE_SIGNED_OUT)
    )
    assert (event.kind, event.sign_in_state) == (EventKind.UNSPECIFIED, SignInState.SIGNED_OUT)


SDK_ENUMS = [
    (SignInState, pb.SignInState),
    (EventKind, pb.EventKind),
    (AppDecision, pb.AppDecision),
    (TokenRevocation, pb.TokenRevocation),
]


@pytest.mark.parametrize(("ours", "api"), SDK_ENUMS, ids=lambda e: getattr(e, "__name__", ""))
def test_each_sdk_enum_is_the_api_enum(ours: type[enum.Enum], api: Any) -> None:
    names = [value.name for value in api.DESCRIPTOR.values]
    prefix = names[0].removesuffix("UNSPECIFIED")
    assert [member.name for member in ours] == [name.removeprefix(prefix) for name in names]
    assert [member.value for member in ours] == [member.name.lower() for member in ours]
    assert _models.ENUMS[api.DESCRIPTOR.name] is ours


def test_the_daemon_speaks_the_sdks_states_and_kinds_and_maps_each_to_the_apis() -> None:
    """One home (states.py) for both sides; the API's value for each the session uses."""
    assert events.EventKind is EventKind and overview.SignInState is SignInState
    assert set(messages.EVENT_KIND) == set(EventKind) - {EventKind.UNSPECIFIED, EventKind.SNAPSHOT}
    assert set(messages.SIGN_IN_STATE) == set(SignInState) - {SignInState.UNSPECIFIED}
    for kind, value in messages.EVENT_KIND.items():
        assert pb.EventKind.Name(value) == f"EVENT_KIND_{kind.name}"
    for state, number in messages.SIGN_IN_STATE.items():
        assert pb.SignInState.Name(number) == f"SIGN_IN_STATE_{state.name}"
