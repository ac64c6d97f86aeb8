"""`signin-broker token --format ...` and `exec`: a token in the shape each tool takes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN, signin_broker
from support.signin import signed_in_daemon

CLI = str(BIN / "signin-broker")


def cli(daemon: DaemonProcess, *args: str, env: dict[str, str] | None = None):
    return signin_broker("--socket", str(daemon.socket_path), *args, env=env)


def current(daemon: DaemonProcess) -> tuple[str, int]:
    with BrokerClient(daemon.socket_path) as client:
        token = client.get_token()
    return token.access_token, token.expires_at_unix


def test_each_format_carries_the_token_in_its_shape(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    token, expires = current(daemon)
    shown = {
        form: cli(daemon, "token", "--format", form).stdout
        for form in ("bare", "header", "json", "env")
    }
    assert shown["bare"] == f"{token}\n"
    assert shown["header"] == f"Authorization: Bearer {token}\n"
    assert json.loads(shown["json"])["access_token"] == token
    assert shown["env"] == f"export SIGNIN_BROKER_TOKEN={token}\n"  # URL-safe: no quotes needed
    named = cli(daemon, "token", "--format", "env", "--env-name", "GITLAB_TOKEN").stdout
    assert named.startswith("export GITLAB_TOKEN=")
    credential = json.loads(cli(daemon, "token", "--format", "exec-credential").stdout)
    assert credential == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {
            "token": token,
            "expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
        },
    }
    daemon.stop()


def test_exec_credential_answers_in_the_version_kubectl_asks_for(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    info = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"}
    older = cli(
        daemon, "token", "--format", "exec-credential",
        env={"KUBERNETES_EXEC_INFO": json.dumps(info)},
    )  # fmt: skip
    assert json.loads(older.stdout)["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    info["apiVersion"] = "client.authentication.k8s.io/v9"
    unknown = cli(
        daemon, "token", "--format", "exec-credential",
        env={"KUBERNETES_EXEC_INFO": json.dumps(info)},
    )  # fmt: skip
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "client.authentication.k8s.io/v9" in unknown.stderr
    daemon.stop()


def test_the_env_line_is_what_a_real_shell_evaluates(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    token, _ = current(daemon)
    asked = f"{CLI} --socket {socket_path} token --format env --env-name TOK"
    script = f'eval "$({asked})"; printf %s "$TOK"'
    evaluated = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert evaluated.stdout == token, evaluated.stderr
    bad = cli(daemon, "token", "--format", "env", "--env-name", "A B; rm -rf ~")
    assert bad.returncode == 2 and bad.stdout == "" and "--env-name" in bad.stderr
    daemon.stop()


def test_exec_hands_the_token_in_the_environment_and_passes_the_exit_status_through(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    token, _ = current(daemon)
    shown = cli(daemon, "exec", "--env", "TOK", "--", "sh", "-c", 'printf %s "$TOK"')
    assert (shown.returncode, shown.stdout) == (0, token)
    default = cli(daemon, "exec", "--", "sh", "-c", 'printf %s "$SIGNIN_BROKER_TOKEN"')
    assert default.stdout == token
    assert cli(daemon, "exec", "--", "sh", "-c", "exit 7").returncode == 7
    killed = subprocess.run(
        [CLI, "--socket", str(socket_path), "exec", "--", "sh", "-c", "kill -TERM $$"],
        capture_output=True, timeout=30,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGTERM  # the process became the command
    missing = cli(daemon, "exec", "--", "no-such-command-here")
    assert missing.returncode == 127 and "no-such-command-here: command not found" in missing.stderr
    assert cli(daemon, "exec").returncode == 2
    daemon.stop()


def test_the_token_never_reaches_a_command_line(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    token, _ = current(daemon)
    seen = cli(daemon, "exec", "--", "sh", "-c", "tr '\\0' ' ' < /proc/$$/cmdline")
    assert seen.returncode == 0 and token not in seen.stdout and "sh" in seen.stdout
    daemon.stop()


def test_without_a_session_or_a_daemon_the_statuses_say_which(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    for args in (("token", "--format", "exec-credential"), ("exec", "--", "true")):
        refused = cli(daemon, *args)
        assert refused.returncode == 4 and refused.stdout == "", args
        assert "signin-broker login" in refused.stderr
    daemon.stop()
    gone = signin_broker("--socket", str(folder / "none.sock"), "exec", "--", "true")
    assert gone.returncode == 3


def test_kubectl_style_id_token_credential_needs_the_users_allowance(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    asked = cli(daemon, "token", "--format", "exec-credential", "--id-token")
    assert asked.returncode == 1 and "--id-token" in asked.stderr  # says how to allow it
    allowed = cli(daemon, "apps", "allow", "signin-broker", "--id-token")
    assert allowed.returncode == 0, allowed.stderr
    credential = json.loads(
        cli(daemon, "token", "--format", "exec-credential", "--id-token").stdout
    )
    id_token = credential["status"]["token"]
    assert (
        id_token.count(".") == 2 and id_token != current(daemon)[0]
    )  # a JWT, not the access token
    daemon.stop()
