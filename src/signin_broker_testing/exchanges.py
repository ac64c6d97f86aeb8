"""A Starlette request as authlib reads it: the body read first (authlib is synchronous)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from authlib.oauth2.rfc6749 import (
    JsonPayload,
    OAuth2Payload,
    OAuth2Request,
)
from starlette.datastructures import Headers

from .rules import FORM_CONTENT_TYPE


def parse_form(headers: Headers, body: bytes) -> list[tuple[str, str]]:
    """The fields of a form body; nothing for any other content type."""
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != FORM_CONTENT_TYPE:
        return []
    return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)


@dataclass(frozen=True, slots=True)
class HttpExchange:
    """A request whose body has been read, so authlib's synchronous code can use it."""

    method: str
    url: str  # built from the stub's own base URL, never from the Host header
    headers: Headers
    query: list[tuple[str, str]]
    body: bytes
    dpop_jkt: str | None = None  # the key of the request's checked DPoP proof, if it had one

    @property
    def form(self) -> list[tuple[str, str]]:
        """The fields of a form body."""
        return parse_form(self.headers, self.body)

    @property
    def parameters(self) -> list[tuple[str, str]]:
        """The OAuth parameters: a POST carries them in its form, anything else in its query."""
        return self.form if self.method == "POST" else self.query


class Parameters(OAuth2Payload):  # type: ignore[misc]
    """AuthlibRequest parameters, keeping repeats so authlib can refuse them."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._first: dict[str, str] = {}
        self._all: defaultdict[str, list[str]] = defaultdict(list)
        for name, value in pairs:
            self._first.setdefault(name, value)
            self._all[name].append(value)

    @property
    def data(self) -> dict[str, str]:
        return self._first

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._all


class AuthlibRequest(OAuth2Request):  # type: ignore[misc]
    """authlib's request, made from an exchange whose body is already read."""

    def __init__(self, exchange: HttpExchange) -> None:
        super().__init__(exchange.method, exchange.url, headers=exchange.headers)
        self.payload = Parameters(exchange.parameters)
        self.resource: str | None = None  # RFC 8707, once a refresh grant has checked it
        self.workspace_id: str | None = None  # once an authorization request has checked it
        self.dpop_jkt = exchange.dpop_jkt  # the tokens issued are bound to it
        self._exchange = exchange

    @property
    def args(self) -> dict[str, str]:
        return dict(self._exchange.query)

    @property
    def form(self) -> dict[str, str]:
        return dict(self._exchange.form)


class JsonBody(JsonPayload):  # type: ignore[misc]
    """A JSON body, for authlib's endpoints that take one (none is registered today)."""

    def __init__(self, body: bytes) -> None:
        self._data = json.loads(body) if body else {}

    @property
    def data(self) -> Any:
        return self._data
