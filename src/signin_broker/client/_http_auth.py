"""What the HTTP clients' auths (signin_broker.httpx, signin_broker.requests) share.

Which token they ask for (account, scopes, audience) and from which broker; each auth
adds how its library attaches the token and sends a request once more after a 401.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ._channel import DEFAULT_TIMEOUT_SECONDS


class TokenRequest:
    """The token an auth asks for, from the broker at `socket_path` (default: the SDK's)."""

    def __init__(
        self,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        audience: str = "",
        socket_path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.account, self.scopes, self.audience = account, tuple(scopes), audience
        self.socket_path, self.timeout = socket_path, timeout

    def ask(self, client: Any, *, refused: bool = False) -> Any:
        """The token (or, from the asyncio client, its awaitable); `refused` after a 401."""
        return client.get_token(
            self.account, scopes=self.scopes, audience=self.audience, refused=refused
        )
