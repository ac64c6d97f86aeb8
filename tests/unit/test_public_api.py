"""The public surface changes only on purpose: these lists are the contract with app developers."""

from __future__ import annotations

import signin_broker
import signin_broker.client


def test_package_root_exports() -> None:
    assert signin_broker.__all__ == [
        "Account",
        "AsyncBrokerClient",
        "BrokerClient",
        "BrokerError",
        "DaemonNotRunning",
        "Event",
        "EventKind",
        "NotSignedIn",
        "SignInState",
        "Status",
        "Token",
        "__version__",
    ]
    for name in signin_broker.__all__:
        assert getattr(signin_broker, name) is not None


def test_client_exports() -> None:
    assert sorted(signin_broker.client.__all__) == sorted(
        [
            "Account",
            "App",
            "AppDecision",
            "AppList",
            "AsyncBrokerClient",
            "AuditEvent",
            "BrokerClient",
            "BrokerError",
            "Caller",
            "DaemonNotRunning",
            "DpopProof",
            "EndedSession",
            "Event",
            "EventKind",
            "Forward",
            "NotSignedIn",
            "ProviderStatus",
            "SignInStart",
            "SignInState",
            "SignOutResult",
            "Status",
            "Token",
            "TokenFile",
            "TokenRevocation",
        ]
    )


def test_token_repr_never_shows_the_secret() -> None:
    token = signin_broker.Token("secret-value", "Bearer", 1, ("openid",), "user:1")
    assert "secret-value" not in repr(token)
    assert token.authorization == "Bearer secret-value"


def test_dpop_proof_repr_never_shows_the_token_or_the_proof() -> None:
    proof = signin_broker.client.DpopProof("proof-jwt", "secret-value", "DPoP", 1, (), "user:1")
    assert "secret-value" not in repr(proof) and "proof-jwt" not in repr(proof)
    assert proof.headers == {"Authorization": "DPoP secret-value", "DPoP": "proof-jwt"}
