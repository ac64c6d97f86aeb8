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


def loopback_tcp_peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the client end of a loopback TCP connection (Linux), else None.

    TCP carries no credentials, but on one machine the kernel's socket table does:
    /proc/net/tcp lists the client's socket (local = client, remote = server) with
    the uid that created it. This lets the loopback web page serve only its user.
    """
    if not sys.platform.startswith("linux"):
        return None
    wanted = (_proc_net_address(*client), _proc_net_address(*server))
    table = "/proc/net/tcp6" if ":" in client[0] else "/proc/net/tcp"
    try:
        with open(table) as rows:  # noqa: PTH123 - a plain read of a kernel table
            next(rows)  # the header
            for row in rows:
                fields = row.split()
                if (fields[1], fields[2]) == wanted:
                    return int(fields[7])
    except OSError:
        return None
    return None


def _proc_net_address(host: str, port: int) -> str:
    """An address as /proc/net/tcp{,6} prints it: native-order 32-bit words in hex, then port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    packed = socket.inet_pton(family, host)
    words = struct.unpack(f"={len(packed) // 4}I", packed)
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"
