"""The default account's access token, as an app of the user's would get it over the socket."""

from __future__ import annotations

from pathlib import Path

from signin_broker.client import BrokerClient


def access_token(socket_path: Path) -> str:
    with BrokerClient(socket_path) as client:
        return client.get_token().access_token
