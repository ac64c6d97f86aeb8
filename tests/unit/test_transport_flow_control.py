"""Flow control on a connection that is not HTTP/2 (a JSON call, or one not yet known)
never reaches grpclib's HTTP/2 handlers.

The transport pauses writing when an answer outgrows its buffer (a 1 MB JSON answer
to a slow reader): grpclib's pause handler, made for HTTP/2, raised AttributeError
("'CheckedProtocol' object has no attribute 'connection'") in the daemon's log.
"""

from __future__ import annotations

from typing import Any

from signin_broker.daemon.api.transport import CheckedProtocol


def test_pausing_a_connection_that_is_not_http2_is_harmless() -> None:
    unused: Any = None
    protocol = CheckedProtocol(unused, unused, unused, gate=unused, json_calls=unused)
    protocol.pause_writing()
    protocol.resume_writing()
