"""Client authentication: the method chosen, what each adds to a request, where secrets live."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import parse_qs, unquote

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from signin_broker.daemon.client_credentials import load_client_auth, load_credentials
from signin_broker.daemon.settings import SettingsError, load
from signin_broker.oidc import client_auth, credentials
from signin_broker.oidc.client_auth import ClientAuth, ClientAuthError, ClientCredentials
from signin_broker.oidc.errors import OAuthError
from signin_broker.oidc.metadata import ProviderMetadata
from signin_broker.store.keys import KeyStoreUnavailable

CLIENT = "desktop-app"
SECRET = "s3cr:et+/ %&x"  # every character Basic must encode: ':' '+' '/' ' ' '%' '&'
ISSUER = "https://id.example.com"
TOKEN_ENDPOINT = ISSUER + "/oauth/token"
EVERYTHING = ("none", "client_secret_basic", "client_secret_post", "private_key_jwt")


def metadata(methods: tuple[str, ...] = EVERYTHING, algs: tuple[str, ...] = ()) -> ProviderMetadata:
    return ProviderMetadata(
        issuer=ISSUER,
        authorization_endpoint=ISSUER + "/authorize",
        token_endpoint=TOKEN_ENDPOINT,
        jwks_uri=ISSUER + "/jwks",
        token_endpoint_auth_methods=methods,
        token_endpoint_auth_signing_algorithms=algs,
    )


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def private_file(folder: Path, name: str, data: bytes, mode: int = 0o600) -> Path:
    path = folder / name
    path.write_bytes(data)
    path.chmod(mode)
    return path


class FakeKeyring:
    """A key store holding what a test put in it, or one that cannot be used."""

    def __init__(self, secrets: dict[str, bytes] | None = None, usable: bool = True) -> None:
        self.secrets = secrets or {}
        self.usable = usable
        self.asked = 0

    def __call__(self) -> FakeKeyring:
        self.asked += 1
        if not self.usable:
            raise KeyStoreUnavailable("no usable keyring (fail.Keyring)")
        return self

    description = "fake keyring"

    def get(self, name: str) -> bytes | None:
        return self.secrets.get(name)


# -- which method -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "key", "advertised", "chosen"),
    [
        (None, None, EVERYTHING, "none"),
        (None, None, ("client_secret_basic",), "none"),  # a public client stays public
        (SECRET, None, EVERYTHING, "client_secret_basic"),
        (SECRET, None, ("client_secret_post", "none"), "client_secret_post"),
        (SECRET, None, ("private_key_jwt",), "client_secret_basic"),  # the RFC 6749 MUST
        (None, "key", EVERYTHING, "private_key_jwt"),
        (None, "key", ("client_secret_basic",), "private_key_jwt"),  # a key is all it has
        (SECRET, "key", EVERYTHING, "private_key_jwt"),
        (SECRET, "key", ("client_secret_post",), "client_secret_post"),
    ],
)
def test_auto_chooses_by_what_is_configured_and_what_the_provider_lists(
    secret: str | None, key: str | None, advertised: tuple[str, ...], chosen: str
) -> None:
    credentials = ClientCredentials(secret=secret, private_key=rsa_key() if key else None)
    assert ClientAuth(CLIENT, "auto", credentials).method(advertised) == chosen


def test_unstated_methods_mean_client_secret_basic_as_discovery_says() -> None:
    document = {
        "issuer": ISSUER,
        "authorization_endpoint": ISSUER + "/a",
        "token_endpoint": TOKEN_ENDPOINT,
        "jwks_uri": ISSUER + "/k",
    }
    unstated = ProviderMetadata.from_document(document, ISSUER)
    assert unstated.token_endpoint_auth_methods == ("client_secret_basic",)
    assert unstated.token_endpoint_auth_signing_algorithms == ()
    stated = ProviderMetadata.from_document(
        {
            **document,
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "token_endpoint_auth_signing_alg_values_supported": ["PS256"],
        },
        ISSUER,
    )
    assert stated.token_endpoint_auth_methods == ("client_secret_post",)
    assert stated.token_endpoint_auth_signing_algorithms == ("PS256",)


def test_an_explicit_method_is_used_whatever_the_provider_lists() -> None:
    auth = ClientAuth(CLIENT, "client_secret_post", ClientCredentials(secret=SECRET))
    assert auth.method(("client_secret_basic",)) == "client_secret_post"


# -- what goes in each request ----------------------------------------------------------


def signed(auth: ClientAuth, provider: ProviderMetadata | None = None) -> tuple[dict, dict, str]:
    body = "grant_type=refresh_token&refresh_token=r1&client_id=" + CLIENT
    form, headers, method = auth.sign(body, provider or metadata())
    return {k: v[0] for k, v in parse_qs(form).items()}, headers, method


def test_none_names_the_client_in_the_form_only() -> None:
    form, headers, method = signed(ClientAuth(CLIENT))
    assert method == "none"
    assert form == {"grant_type": "refresh_token", "refresh_token": "r1", "client_id": CLIENT}
    assert headers == {}


def test_basic_form_encodes_id_and_secret_then_base64_and_leaves_the_form_alone() -> None:
    form, headers, _ = signed(ClientAuth(CLIENT, "client_secret_basic", ClientCredentials(SECRET)))
    scheme, _, encoded = headers["Authorization"].partition(" ")
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    assert scheme == "Basic"
    assert (unquote(user), unquote(password)) == (CLIENT, SECRET)  # RFC 6749 2.3.1
    assert ":" not in password and "client_id" not in form and "client_secret" not in form


def test_post_puts_id_and_secret_in_the_form() -> None:
    form, headers, _ = signed(ClientAuth(CLIENT, "client_secret_post", ClientCredentials(SECRET)))
    assert (form["client_id"], form["client_secret"], headers) == (CLIENT, SECRET, {})


@pytest.mark.parametrize("audience", ["token_endpoint", "issuer"])
def test_private_key_jwt_signs_a_short_lived_single_use_assertion(audience: str) -> None:
    key = rsa_key()
    auth = ClientAuth(
        CLIENT,
        "private_key_jwt",
        ClientCredentials(private_key=key, key_id="k-2024"),
        assertion_audience=audience,
    )
    first, headers, _ = signed(auth)
    second, _, _ = signed(auth)
    assert headers == {} and first["client_id"] == CLIENT
    assert first["client_assertion_type"] == client_auth.ASSERTION_TYPE
    assertion = first["client_assertion"]
    assert jwt.get_unverified_header(assertion) == {"alg": "RS256", "kid": "k-2024", "typ": "JWT"}
    expected_audience = TOKEN_ENDPOINT if audience == "token_endpoint" else ISSUER
    claims = jwt.decode(
        assertion, key.public_key(), algorithms=["RS256"], audience=expected_audience
    )
    assert claims["iss"] == claims["sub"] == CLIENT
    assert claims["exp"] - claims["iat"] == client_auth.ASSERTION_SECONDS <= 60
    other = jwt.decode(second["client_assertion"], options={"verify_signature": False})
    assert other["jti"] != claims["jti"]


@pytest.mark.parametrize(
    ("key", "listed", "algorithm"),
    [
        (rsa_key(), (), "RS256"),
        (rsa_key(), ("PS256", "ES256"), "PS256"),
        (ec.generate_private_key(ec.SECP384R1()), (), "ES384"),
        (ed25519.Ed25519PrivateKey.generate(), ("EdDSA",), "EdDSA"),
    ],
)
def test_the_assertion_is_signed_with_an_algorithm_the_provider_lists(
    key: rsa.RSAPrivateKey, listed: tuple[str, ...], algorithm: str
) -> None:
    auth = ClientAuth(CLIENT, "private_key_jwt", ClientCredentials(private_key=key))
    form, _, _ = signed(auth, metadata(algs=listed))
    assert jwt.get_unverified_header(form["client_assertion"])["alg"] == algorithm


def test_credentials_in_a_caller_form_are_replaced_not_sent_twice() -> None:
    auth = ClientAuth(CLIENT, "client_secret_post", ClientCredentials(SECRET))
    body = "grant_type=x&client_id=other&client_secret=old&client_assertion=forged"
    form, _, _ = auth.sign(body, metadata())
    assert parse_qs(form) == {
        "grant_type": ["x"],
        "client_id": [CLIENT],
        "client_secret": [SECRET],
    }


def test_credentials_that_could_not_be_loaded_refuse_every_request() -> None:
    auth = ClientAuth(CLIENT, "client_secret_basic", problem="the keyring refused")
    with pytest.raises(OAuthError) as refused:
        auth.sign("grant_type=x", metadata())
    assert refused.value.error == "invalid_client"
    assert "keyring refused" in refused.value.description


def test_no_repr_shows_the_secret_or_the_key() -> None:
    credentials = ClientCredentials(SECRET, "keyring", rsa_key(), "kid")
    assert SECRET not in repr(credentials) and "PRIVATE" not in repr(credentials)


# -- where secrets come from -------------------------------------------------------------


def test_a_secret_file_must_be_the_users_alone(tmp_path: Path) -> None:
    readable = private_file(tmp_path, "secret", SECRET.encode() + b"\n", 0o644)
    with pytest.raises(ClientAuthError) as refused:
        credentials.read_secret_file(readable)
    assert f"other users can read or write {readable} (mode 0644)" in str(refused.value)
    assert f"chmod 600 {readable}" in str(refused.value)
    assert SECRET not in str(refused.value)
    readable.chmod(0o640)
    with pytest.raises(ClientAuthError, match="mode 0640"):
        credentials.read_secret_file(readable)
    readable.chmod(0o600)
    assert credentials.read_secret_file(readable) == SECRET  # the final newline is not part


def test_a_symlink_a_fifo_a_folder_or_nothing_is_refused(tmp_path: Path) -> None:
    real = private_file(tmp_path, "real", b"secret")
    (tmp_path / "link").symlink_to(real)
    os.mkfifo(tmp_path / "fifo", 0o600)  # opened without blocking, then refused
    (tmp_path / "folder").mkdir(mode=0o700)
    for name, says in [
        ("link", "is a symlink"),
        ("fifo", "is not a regular file"),
        ("folder", "is not a regular file"),
        ("missing", "does not exist"),
    ]:
        with pytest.raises(ClientAuthError, match=says):
            credentials.read_secret_file(tmp_path / name)


@pytest.mark.parametrize("content", [b"", b"\n", b"one\ntwo\n", b"tab\there", b"\xff\xfe"])
def test_a_secret_file_holds_one_line_of_text(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(ClientAuthError):
        credentials.read_secret_file(private_file(tmp_path, "secret", content))


def test_a_private_key_file_must_be_an_unencrypted_strong_enough_pem_key(tmp_path: Path) -> None:
    good = private_file(tmp_path, "good.pem", pem(ec.generate_private_key(ec.SECP256R1())))
    assert isinstance(credentials.read_private_key(good), ec.EllipticCurvePrivateKey)
    encrypted = rsa_key().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    for name, data, says in [
        ("encrypted.pem", encrypted, "is encrypted"),
        ("weak.pem", pem(weak), "1024 bits"),
        ("garbage.pem", b"-----BEGIN PRIVATE KEY-----\nnope\n", "not a PEM private key"),
    ]:
        with pytest.raises(ClientAuthError, match=says):
            credentials.read_private_key(private_file(tmp_path, name, data))
    with pytest.raises(ClientAuthError, match="mode 0644"):
        credentials.read_private_key(private_file(tmp_path, "open.pem", pem(rsa_key()), 0o644))


def test_auto_takes_a_secret_from_the_keyring_under_the_clients_name() -> None:
    keyring = FakeKeyring({f"client:{CLIENT}:secret": SECRET.encode()})
    credentials = load_credentials(CLIENT, "auto", keyring=keyring)
    assert (credentials.secret, credentials.secret_source) == (SECRET, "keyring")
    other = load_credentials("another-client", "auto", keyring=keyring)
    assert other.secret is None


def test_a_secret_file_wins_and_a_key_alone_needs_no_keyring(tmp_path: Path) -> None:
    keyring = FakeKeyring({f"client:{CLIENT}:secret": b"from-keyring"})
    secret_file = private_file(tmp_path, "secret", b"from-file\n")
    credentials = load_credentials(CLIENT, "auto", secret_file=secret_file, keyring=keyring)
    assert credentials.secret == "from-file"
    key_file = private_file(tmp_path, "key.pem", pem(rsa_key()))
    load_credentials(CLIENT, "auto", private_key_file=key_file, keyring=keyring)
    load_credentials(CLIENT, "none", keyring=keyring)
    assert keyring.asked == 0


def test_no_keyring_means_a_public_client_for_auto_and_an_error_for_a_secret_method() -> None:
    broken = FakeKeyring(usable=False)
    assert load_credentials(CLIENT, "auto", keyring=broken).secret is None
    with pytest.raises(ClientAuthError, match="keyring cannot be used.*client_secret_file"):
        load_credentials(CLIENT, "client_secret_basic", keyring=broken)
    with pytest.raises(ClientAuthError, match=f"client-secret set --client-id {CLIENT}"):
        load_credentials(CLIENT, "client_secret_post", keyring=FakeKeyring())


def test_with_key_store_file_the_keyring_is_never_asked() -> None:
    assert load_credentials(CLIENT, "auto", keyring=None).secret is None
    with pytest.raises(ClientAuthError, match="key_store is file"):
        load_credentials(CLIENT, "client_secret_basic", keyring=None)


def test_a_client_that_cannot_authenticate_refuses_rather_than_goes_public(
    caplog: pytest.LogCaptureFixture,
) -> None:
    auth = load_client_auth(
        CLIENT,
        "client_secret_basic",
        secret_file=None,
        private_key_file=None,
        key_id="",
        assertion_audience="token_endpoint",
        keyring=FakeKeyring(),
    )
    with pytest.raises(OAuthError, match="invalid_client"):
        auth.sign("grant_type=x", metadata())
    assert "client authentication cannot work" in caplog.text


# -- settings --------------------------------------------------------------------------------


def settings_with(tmp_path: Path, *argv: str, **env: str):
    config = tmp_path / "config.toml"
    config.touch()
    return load(list(argv), {"SIGNIN_BROKER_CONFIG": str(config), **env})


def test_client_auth_settings_have_a_flag_an_env_var_and_a_file_key(tmp_path: Path) -> None:
    defaults = settings_with(tmp_path).main
    assert (defaults.client_auth, defaults.client_secret_file) == ("auto", None)
    assert defaults.client_assertion_audience == "token_endpoint"
    key_file = private_file(tmp_path, "key.pem", pem(rsa_key()))
    from_flags = settings_with(
        tmp_path,
        "--client-auth",
        "private_key_jwt",
        "--client-private-key-file",
        str(key_file),
        "--client-key-id",
        "kid-1",
    ).main
    assert (from_flags.client_private_key_file, from_flags.client_key_id) == (key_file, "kid-1")
    secret_file = private_file(tmp_path, "secret", b"s\n")
    from_env = settings_with(
        tmp_path,
        SIGNIN_BROKER_CLIENT_SECRET_FILE=str(secret_file),
        SIGNIN_BROKER_CLIENT_AUTH="client_secret_post",
        SIGNIN_BROKER_CLIENT_ASSERTION_AUDIENCE="issuer",
    ).main
    assert (from_env.client_auth, from_env.client_secret_file) == (
        "client_secret_post",
        secret_file,
    )
    (tmp_path / "config.toml").write_text('client_auth = "client_secret_basic"\n')
    assert settings_with(tmp_path).main.client_auth == "client_secret_basic"


def test_a_secret_file_others_can_read_stops_the_daemon_with_what_to_run(tmp_path: Path) -> None:
    readable = private_file(tmp_path, "secret", SECRET.encode(), 0o644)
    with pytest.raises(SettingsError) as refused:
        settings_with(tmp_path, "--client-secret-file", str(readable))
    message = str(refused.value)
    assert message.startswith("client_secret_file (from --client-secret-file)")
    assert f"run `chmod 600 {readable}`" in message and SECRET not in message


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--client-auth", "private_key_jwt"], "set client_private_key_file too"),
        (["--client-auth", "client_secret_jwt"], "must be one of auto, none"),
        (["--client-assertion-audience", "everyone"], '"token_endpoint"'),
        (["--client-secret-file", "relative/secret"], "must be an absolute path"),
    ],
)
def test_client_auth_settings_that_cannot_work_are_refused(
    tmp_path: Path, argv: list[str], says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        settings_with(tmp_path, *argv)


def test_a_public_client_with_a_secret_file_is_a_contradiction(tmp_path: Path) -> None:
    secret_file = private_file(tmp_path, "secret", b"s")
    with pytest.raises(SettingsError, match="client_auth is none"):
        settings_with(tmp_path, "--client-auth", "none", "--client-secret-file", str(secret_file))
