"""The kernel's account of who is on the other end of a Unix socket connection.

One small interface over the platforms: SO_PEERCRED on Linux, LOCAL_PEERCRED and
LOCAL_PEERPID on macOS and the BSDs. The answer describes the process that called
connect(), recorded by the kernel at that moment; the peer cannot change it.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass

# Linux: struct ucred { pid_t pid; uid_t uid; gid_t gid; }
_UCRED = struct.Struct("3i")
# Linux 6.5+: a pidfd of the peer, which pins the process against pid reuse.
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
# macOS and BSD: getsockopt(SOL_LOCAL, LOCAL_PEERCRED) -> struct xucred; LOCAL_PEERPID -> pid_t.
_SOL_LOCAL = 0
_LOCAL_PEERCRED = 0x001
_LOCAL_PEERPID = 0x002
_XUCRED = struct.Struct("IIh16I")  # cr_version, cr_uid, cr_ngroups, cr_groups[16]


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """Effective uid and gid of the connecting process, and its pid where the platform tells."""

    uid: int
    gid: int
    pid: int | None


def read_peer_credentials(sock: socket.socket) -> PeerCredentials:
    """Ask the kernel who connected to this socket; raises OSError when it cannot say."""
    if sys.platform.startswith("linux"):
        pid, uid, gid = _UCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        )
        return PeerCredentials(uid=uid, gid=gid, pid=pid or None)
    raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED.size)
    _version, uid, _ngroups, gid, *_ = _XUCRED.unpack(raw)
    try:
        (peer_pid,) = struct.unpack("i", sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))
    except OSError:  # the BSDs have no LOCAL_PEERPID
        peer_pid = None
    return PeerCredentials(uid=uid, gid=gid, pid=peer_pid)


def open_peer_pidfd(sock: socket.socket) -> int | None:
    """A pidfd for the peer process (Linux 6.5+), or None where the kernel offers none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return None
