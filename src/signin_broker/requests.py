"""`BrokerAuth` for requests: each request carries a token from the broker.

    import requests
    from signin_broker.requests import BrokerAuth

    requests.get("https://api.example.com/me", auth=BrokerAuth())

As with the httpx one (signin_broker.httpx): the token is asked for per request, and
on a 401 the broker is told it was refused, renews it, and the request is sent once
more with the new token (the way requests' own digest auth answers a 401); a step-up
challenge gets a token of a sign-in that meets it first. A DPoP-bound token goes with a
proof for each request, and a `use_dpop_nonce` challenge is answered once with the
server's nonce. Install
with the `requests` extra (or `pip install requests`).
"""

from __future__ import annotations

import weakref
from typing import Any

import requests
from requests.auth import AuthBase

from .client import BrokerClient
from .client._http_auth import TokenRequest, attach

# The requests sent once more after a 401: a second 401 on one of them stands.
_RESENT: weakref.WeakSet[requests.PreparedRequest] = weakref.WeakSet()


class BrokerAuth(TokenRequest, AuthBase):
    """A requests auth that asks the broker for the token of `account` (default: the default)."""

    _broker: BrokerClient | None = None

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        attach(request.headers, self._token(request))
        request.hooks["response"].append(self._once_more_on_401)
        return request

    def _token(self, request: requests.PreparedRequest, **asked: Any) -> Any:
        if self._broker is None:
            self._broker = BrokerClient(self.socket_path, timeout=self.timeout)
        method, url = str(request.method), str(request.url)
        sent = self.ask(self._broker, method, url, **asked)
        return self.ask(self._broker, method, url, proven=True) if self.unproven(sent) else sent

    def _once_more_on_401(self, response: requests.Response, **send: Any) -> requests.Response:
        sent = response.request
        challenge = [response.headers.get("www-authenticate", "")]  # several: joined by ", "
        again = self.again(response.status_code, response.headers, str(sent.url), challenge)
        if again is None or sent in _RESENT:
            return response  # a second 401 stands
        renewed = self._token(sent, **again)
        if again["refused"] and sent.headers.get("Authorization") == renewed.authorization:
            return response  # the daemon kept the token: nothing new to try
        response.content  # noqa: B018 - consume, so the connection can be reused
        response.close()
        again_sent = sent.copy()
        attach(again_sent.headers, renewed)
        _RESENT.add(again_sent)
        retried: requests.Response = response.connection.send(again_sent, **send)
        retried.history.append(response)
        retried.request = again_sent
        return retried

    def close(self) -> None:
        """Close the broker connection."""
        if self._broker is not None:
            self._broker.close()
