"""Browser extensions as apps, without a browser: who counts as one, what the policy lets
them have, the `browsers` setting, the native messaging frames and the manifests.

A real daemon and host are in tests/integration/test_native_host.py; real Chromium and
Firefox in tests/browser/test_browser_extension.py."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import struct
from pathlib import Path

import pytest

from signin_broker.cli import _browsers, _native_host
from signin_broker.daemon.apps.gate import AppGate
from signin_broker.daemon.apps.policy import (
    AppRule,
    Decision,
    PolicyError,
    PolicyFile,
    parse,
    render,
)
from signin_broker.daemon.browser_setting import parse_browsers
from signin_broker.daemon.callers.browsers import (
    BrowserHosts,
    NotFromABrowser,
    names_an_extension,
)
from signin_broker.daemon.callers.identity import Caller, _after_script
from signin_broker.daemon.refusals import AppDenied, NotABrowserApp
from signin_broker.identities import AppId, AppKind
from signin_broker.session.validation import check_origin
from support.commands import BIN, signin_broker

CHROMIUM_ID = _browsers.REFERENCE_IDS["chromium"]
FIREFOX_ID = _browsers.REFERENCE_IDS["firefox"]
FOLDER = "/opt/sb/bin"
HOST = f"{FOLDER}/signin-broker-native-host"
CHROMIUM = "/usr/lib/chromium/chromium"
FIREFOX = "/usr/lib/firefox-esr/firefox-esr"


@pytest.fixture
def hosts() -> BrowserHosts:
    return BrowserHosts([("brave", "/opt/brave.com/brave/brave")], folders=[FOLDER])


# -- which callers claim to be the host, and which are taken for an extension ------------


@pytest.mark.parametrize(
    ("cmdline", "passed"),
    [
        (
            ["python3", HOST, f"chrome-extension://{CHROMIUM_ID}/"],
            [f"chrome-extension://{CHROMIUM_ID}/"],
        ),
        (["python3", "/elsewhere/signin-broker-native-host", "x"], ["x"]),
        (["python3", f"{FOLDER}/signin-broker", "native-host", "a"], ["a"]),
        (["python3", f"{FOLDER}/signin-broker", "--socket", "native-host", "token"], None),
        (["python3", f"{FOLDER}/signin-broker", "--timeout", "5", "native-host", "b"], ["b"]),
        (["python3", "-m", "signin_broker.cli", "native-host", "c"], ["c"]),
        (["python3", f"{FOLDER}/signin-broker", "token", "--account", "native-host"], None),
        (["python3", "/home/me/app.py", "native-host"], None),
    ],
)
def test_who_claims_to_be_the_native_host(
    hosts: BrowserHosts, cmdline: list[str], passed: list[str] | None
) -> None:
    script = cmdline[1] if cmdline[1] != "-m" else f"-m {cmdline[2]}"
    assert hosts.claimed(script, _after_script(cmdline)) == passed


def test_an_extension_is_named_by_its_browser_and_the_id_the_browser_passed(
    hosts: BrowserHosts,
) -> None:
    chromium = hosts.extension(HOST, True, [f"chrome-extension://{CHROMIUM_ID}/"], CHROMIUM)
    assert str(chromium) == f"browser:chromium/{CHROMIUM_ID}"
    firefox = hosts.extension(
        HOST, True, ["/x/org.signin_broker.native_host.json", FIREFOX_ID], FIREFOX
    )
    assert str(firefox) == f"browser:firefox/{FIREFOX_ID}"
    added = hosts.extension(
        HOST, True, [f"chrome-extension://{CHROMIUM_ID}/"], "/opt/brave.com/brave/brave"
    )
    assert str(added) == f"browser:brave/{CHROMIUM_ID}"
    assert AppId.parse(str(chromium)) == chromium and chromium.kind is AppKind.BROWSER


@pytest.mark.parametrize(
    ("script", "absolute", "passed", "parent", "said"),
    [
        (
            HOST,
            True,
            [f"chrome-extension://{CHROMIUM_ID}/"],
            "/usr/bin/bash",
            "parent is /usr/bin/bash",
        ),
        (HOST, True, [f"chrome-extension://{CHROMIUM_ID}/"], "", "parent is unknown"),
        (
            "/tmp/signin-broker-native-host",
            True,
            [f"chrome-extension://{CHROMIUM_ID}/"],
            CHROMIUM,
            "not this installation's",
        ),
        (HOST, False, [f"chrome-extension://{CHROMIUM_ID}/"], CHROMIUM, "not this installation's"),
        (HOST, True, ["/x/m.json", FIREFOX_ID], CHROMIUM, "name no chromium extension"),
        (HOST, True, [f"chrome-extension://{CHROMIUM_ID}/"], FIREFOX, "name no firefox extension"),
        (HOST, True, ["chrome-extension://ABC/"], CHROMIUM, "name no chromium extension"),
        (HOST, True, [], CHROMIUM, "name no chromium extension"),
        (HOST, True, [f"chrome-extension://{CHROMIUM_ID}/", "extra"], CHROMIUM, "name no"),
        (HOST, True, ["/x/m.txt", FIREFOX_ID], FIREFOX, "name no firefox extension"),
    ],
)
def test_a_claimed_host_that_is_not_an_extension_is_refused_with_the_reason(
    hosts: BrowserHosts, script: str, absolute: bool, passed: list[str], parent: str, said: str
) -> None:
    with pytest.raises(NotFromABrowser, match=said):
        hosts.extension(script, absolute, passed, parent)


def test_a_refused_caller_has_no_app_and_says_why() -> None:
    caller = Caller(1000, 1000, 42, "/usr/bin/python3", 1, HOST, refusal="not from a browser")
    assert not caller.identified and caller.app == "" and not caller.browser
    browser = Caller(
        1000, 1000, 42, "/usr/bin/python3", 1, HOST, AppId(AppKind.BROWSER, "chromium/x")
    )
    assert browser.browser and browser.app == "browser:chromium/x"


@pytest.mark.parametrize(
    ("app", "named"),
    [
        (f"browser:chromium/{CHROMIUM_ID}", True),
        (f"browser:firefox/{FIREFOX_ID}", True),
        ("browser:firefox/{01234567-89ab-cdef-0123-456789abcdef}", True),
        ("browser:chromium/short", False),
        (f"browser:Chromium/{CHROMIUM_ID}", False),
        (f"browser:/{CHROMIUM_ID}", False),
        (f"program:chromium/{CHROMIUM_ID}", False),
        ("/usr/bin/python3 /home/me/app.py", False),
    ],
)
def test_an_extension_app_is_well_formed(app: str, named: bool) -> None:
    assert names_an_extension(app) is named


def test_the_browsers_setting_reads_name_path_pairs() -> None:
    assert parse_browsers("brave=/opt/brave/brave, edge=/opt/microsoft/msedge/msedge") == (
        ("brave", "/opt/brave/brave"),
        ("edge", "/opt/microsoft/msedge/msedge"),
    )
    assert parse_browsers(["x=/a/../b/x"]) == (("x", "/b/x"),)
    assert parse_browsers("") == ()
    for bad in ("brave", "Brave=/x", "brave=relative/x", "=/x"):
        with pytest.raises(ValueError, match="NAME=PATH"):
            parse_browsers(bad)


# -- origins: their form, the policy's list, and what the gate lets a browser caller do -----


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://App.Example.com:443", "https://app.example.com"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("http://[::1]:80", "http://[::1]"),
    ],
)
def test_origins_are_read_as_browsers_write_them(given: str, origin: str) -> None:
    assert check_origin(given) == origin


@pytest.mark.parametrize(
    "bad",
    [
        "null",
        "file:///x",
        "https://a/b",
        "https://a?q",
        "https://u@a",
        "http://a:99999",
        "https://",
        "app.example.com",
        "https://ä.example",
    ],
)
def test_what_is_not_an_origin_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a web origin"):
        check_origin(bad)


def test_origins_belong_to_browser_extensions_in_the_policy_file() -> None:
    rule = AppRule(
        f"browser:chromium/{CHROMIUM_ID}", Decision.ALLOW, origins=("https://a.example",)
    )
    assert parse(render([rule])) == {rule.app: rule}
    with pytest.raises(PolicyError, match="browser extension"):
        parse(
            '[[apps]]\napp = "/usr/bin/mail"\ndecision = "allow"\norigins = ["https://a.example"]\n'
        )
    with pytest.raises(PolicyError, match="not a web origin"):
        parse(f'[[apps]]\napp = "{rule.app}"\ndecision = "allow"\norigins = ["https://a/b"]\n')


def _browser_caller() -> Caller:
    return Caller(
        1000,
        1000,
        42,
        "/usr/bin/python3",
        1,
        HOST,
        AppId(AppKind.BROWSER, f"chromium/{CHROMIUM_ID}"),
    )


def test_a_browser_caller_gets_tokens_for_its_listed_origins_only(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=1)
    caller = _browser_caller()

    async def scenario() -> None:
        with pytest.raises(AppDenied, match="its policy's origins: none"):
            await gate.admit_app(caller, "http://127.0.0.1:8000")  # allowed by default, no origin
        await gate.decide(caller.app, Decision.ALLOW, origins=["http://127.0.0.1:8000"])
        assert (await gate.admit_app(caller, "http://127.0.0.1:8000")).accounts is None
        with pytest.raises(AppDenied, match="--origin https://evil.example"):
            await gate.admit_app(caller, "https://evil.example")
        # Tokens only (no sign-in, reads or management): the access table's, as
        # tests/unit/test_access_table.py holds it; in lists and events it sees nothing.
        assert (await gate.visible_to(caller)).accounts == frozenset()

    asyncio.run(scenario())


def test_an_extension_is_allowed_before_its_first_request_and_only_it_takes_origins(
    tmp_path: Path,
) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=1)
    app = f"browser:firefox/{FIREFOX_ID}"

    async def scenario() -> None:
        view, _ = await gate.decide(app, Decision.ALLOW, origins=["https://a.example"])
        assert view.rule.origins == ("https://a.example",)
        program = Caller(1000, 1000, 7, "/usr/bin/mail", 2)
        await gate.admit_app(program)  # now known
        with pytest.raises(NotABrowserApp):
            await gate.decide("/usr/bin/mail", Decision.ALLOW, origins=["https://a.example"])

    asyncio.run(scenario())
    assert 'origins = ["https://a.example"]' in (tmp_path / "apps.toml").read_text()


def test_a_refused_host_is_told_why(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=1)
    refused = Caller(
        1000, 1000, 42, "/usr/bin/python3", 1, HOST, refusal="its parent is /usr/bin/bash"
    )
    with pytest.raises(AppDenied, match="refused: its parent is /usr/bin/bash"):
        asyncio.run(gate.admit_app(refused))


# -- the native messaging frames ------------------------------------------------------------


def _frame(body: bytes, length: int | None = None) -> bytes:
    return struct.pack("=I", len(body) if length is None else length) + body


def test_frames_are_read_one_by_one_and_the_end_between_them_is_clean() -> None:
    stream = io.BytesIO(_frame(b'{"id": 1}') + _frame(b'{"id": 2}'))
    assert _native_host.read_message(stream) == {"id": 1}
    assert _native_host.read_message(stream) == {"id": 2}
    assert _native_host.read_message(stream) is None


@pytest.mark.parametrize(
    ("stream", "said"),
    [
        (struct.pack("=I", 0xFFFFFFFF) + b"{}", "4294967295 bytes was announced"),
        (_frame(b"x" * 10, length=_native_host.MAX_REQUEST_BYTES + 1), "at most 65536"),
        (b"\x05\x00", "inside a message's length"),
        (_frame(b'{"id": 1}', length=100), "inside a message (9 of 100 bytes)"),
        (_frame(b"{not json"), "not UTF-8 JSON"),
        (_frame(b"\xff\xfe{}"), "not UTF-8 JSON"),
        (_frame(b"[1, 2]"), "not a JSON object"),
    ],
)
def test_a_stream_that_breaks_the_protocol_is_refused_early(stream: bytes, said: str) -> None:
    with pytest.raises(
        _native_host.ProtocolError, match=said.replace("(", r"\(").replace(")", r"\)")
    ):
        _native_host.read_message(io.BytesIO(stream))


def test_an_answer_too_large_for_a_browser_becomes_a_refusal() -> None:
    out = io.BytesIO()
    _native_host.Answers(out).send({"id": 3, "ok": True, "token": {"accessToken": "x" * (1 << 20)}})
    (length,) = struct.unpack("=I", out.getvalue()[:4])
    assert json.loads(out.getvalue()[4 : 4 + length]) == {
        "id": 3, "ok": False, "code": "resource_exhausted", "error": "too large",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ({"kind": "listAccounts", "origin": "o", "request": {}}, "kind must be one of"),
        ({"kind": "getToken", "request": {}}, "carries its origin"),
        (
            {"kind": "getToken", "origin": "o", "request": {"refreshToken": True}},
            "takes no 'refreshToken'",
        ),
        (
            {"kind": "getToken", "origin": "o", "request": {"scopes": "openid"}},
            "scopes must be a list",
        ),
        ({"kind": "getToken", "origin": "o", "request": {"scopes": [1]}}, "list of text"),
        ({"kind": "getToken", "origin": "o", "request": {"minTtlSeconds": True}}, "must be a int"),
        (
            {"kind": "signDpopProof", "origin": "o", "request": {"idToken": True}},
            "takes no 'idToken'",
        ),
    ],
)
def test_a_request_the_host_does_not_relay_is_refused_before_the_daemon(
    message: dict[str, object], said: str
) -> None:
    answer = _native_host._answer({"id": 9, **message}, "/nonexistent/broker.sock")
    assert answer["ok"] is False and answer["code"] == "invalid_argument" and answer["id"] == 9
    assert said in str(answer["error"])


def test_the_page_sees_no_id_token_it_did_not_ask_for() -> None:
    daemon = {
        "access_token": "at",
        "token_type": "Bearer",
        "expires_at_unix": "9",
        "id_token": "idt",
    }
    assert "idToken" not in _native_host._token("getToken", daemon, id_token=False)
    assert _native_host._token("getToken", daemon, id_token=True)["idToken"] == "idt"


# -- the manifests, and the reference extension ----------------------------------------------


def test_the_reference_extension_id_is_the_one_its_key_makes() -> None:
    manifest = json.loads((_browsers.REFERENCE_EXTENSION / "manifest.json").read_text())
    digest = hashlib.sha256(base64.b64decode(manifest["key"])).hexdigest()[:32]
    assert "".join(chr(ord("a") + int(c, 16)) for c in digest) == CHROMIUM_ID
    assert manifest["browser_specific_settings"]["gecko"]["id"] == FIREFOX_ID
    assert manifest["manifest_version"] == 3 and manifest["permissions"] == ["nativeMessaging"]


def test_manifests_name_the_host_and_the_extensions_each_browser_reads(tmp_path: Path) -> None:
    chromium = _browsers.host_manifest("chromium", [CHROMIUM_ID], "/opt/sb/bin/h")
    assert chromium["allowed_origins"] == [f"chrome-extension://{CHROMIUM_ID}/"]
    firefox = _browsers.host_manifest("firefox", [FIREFOX_ID], "/opt/sb/bin/h")
    assert firefox["allowed_extensions"] == [FIREFOX_ID] and firefox["path"] == "/opt/sb/bin/h"
    with pytest.raises(ValueError, match="absolute"):
        _browsers.host_manifest("chrome", [CHROMIUM_ID], "relative/h")
    assert _browsers.extensions_for(
        "chrome", [f"chrome-extension://{CHROMIUM_ID}/", FIREFOX_ID]
    ) == [CHROMIUM_ID]
    assert _browsers.extensions_for("firefox", [CHROMIUM_ID, FIREFOX_ID]) == [FIREFOX_ID]
    with pytest.raises(ValueError, match="no --extension is a firefox"):
        _browsers.extensions_for("firefox", [CHROMIUM_ID])
    target = tmp_path / "deep" / "m.json"
    _browsers.write_manifest(target, chromium)
    assert json.loads(target.read_text()) == chromium and target.stat().st_mode & 0o777 == 0o644


def test_the_user_folders_follow_the_browsers_own_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CHROME_CONFIG_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert _browsers.user_folder("chromium") == tmp_path / "cfg/chromium/NativeMessagingHosts"
    assert _browsers.user_folder("chrome") == tmp_path / "cfg/google-chrome/NativeMessagingHosts"
    assert _browsers.user_folder("firefox") == tmp_path / ".mozilla/native-messaging-hosts"
    monkeypatch.setenv("CHROME_CONFIG_HOME", str(tmp_path / "chrome-home"))
    assert (
        _browsers.user_folder("chrome")
        == tmp_path / "chrome-home/google-chrome/NativeMessagingHosts"
    )


def test_uninstall_removes_every_manifest_written_with_no_browser_left_on_path(
    tmp_path: Path,
) -> None:
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PATH": str(BIN)}
    written = signin_broker(
        "install-browser", "--browser", "chromium", "--browser", "firefox", "--json", env=home
    )
    assert written.returncode == 0, written.stderr
    manifests = [Path(row["manifest"]) for row in json.loads(written.stdout)["manifests"]]
    assert len(manifests) == 2 and all(m.is_file() for m in manifests)
    other = tmp_path / "cfg" / "google-chrome" / "NativeMessagingHosts" / "other.json"
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    removed = signin_broker("install-browser", "--uninstall", env=home)  # no browser on PATH
    assert removed.returncode == 0, removed.stderr
    assert not any(m.exists() for m in manifests) and other.exists()
    assert removed.stdout.count("removed ") == 2 and "chrome: none at" in removed.stdout
