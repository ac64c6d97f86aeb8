"""`BrokerAuth` for requests: each request carries a token from the broker.

    import requests
    from signin_broker.requests import BrokerAuth

    requests.get("https://api.example.com/me", auth=BrokerAuth())

As with the httpx one (signin_broker.httpx): the token is asked for per request, and
on a 401 the broker is told it was refused, renews it, and the request is sent once
more with the new token (the way requests' own digest auth answers a 401); a step-up
challenge gets a token of a sign-in that meets it first. Install
with `pip install signin-broker[requests]`.
"""

from __future__ import annotations

import weakref
from typing import Any

import requests
from requests.auth import AuthBase

from .client import BrokerClient
from .client._http_auth import TokenRequest

# The requests sent once more after a 401: a second 401 on one of them stands.
_RESENT: weakref.WeakSet[requests.PreparedRequest] = weakref.WeakSet()


class BrokerAuth(TokenRequest, AuthBase):
    """A requests auth that asks the broker for the token of `account` (default: the default)."""

    _broker: BrokerClient | None = None

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = self._token().authorization
        request.hooks["response"].append(self._once_more_on_401)
        return request

    def _token(self, *, refused: bool = False, challenge: list[str] | None = None) -> Any:
        if self._broker is None:
            self._broker = BrokerClient(self.socket_path, timeout=self.timeout)
        return self.ask(self._broker, refused=refused, challenge=challenge)

    def _once_more_on_401(self, response: requests.Response, **send: Any) -> requests.Response:
        sent = response.request
        if response.status_code != requests.codes.unauthorized or sent in _RESENT:
            return response  # a second 401 stands
        challenge = [response.headers.get("www-authenticate", "")]  # several: joined by ", "
        renewed = self._token(refused=True, challenge=challenge)
        if sent.headers.get("Authorization") == renewed.authorization:
            return response  # the daemon kept the token: nothing new to try
        response.content  # noqa: B018 - consume, so the connection can be reused
        response.close()
        again = sent.copy()
        again.headers["Authorization"] = renewed.authorization
        _RESENT.add(again)
        retried: requests.Response = response.connection.send(again, **send)
        retried.history.append(response)
        retried.request = again
        return retried

    def close(self) -> None:
        """Close the broker connection."""
        if self._broker is not None:
            self._broker.close()
