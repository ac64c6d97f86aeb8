"""The kernel's account of who is on the other end of a Unix socket connection.

One small interface over the platforms: SO_PEERCRED on Linux, LOCAL_PEERCRED and
LOCAL_PEERPID on macOS and the BSDs. The answer describes the process that called
connect(), recorded by the kernel at that moment; the peer cannot change it.
"""

from __future__ import annotations

import ipaddress
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


# Linux sock_diag (linux/sock_diag.h, linux/inet_diag.h): one TCP socket, looked up by its
# four addresses as `ss` does. Request: nlmsghdr, inet_diag_req_v2 (family, protocol, ext,
# pad, states, then the socket id: ports big-endian, two 16-byte addresses, interface,
# cookie). Answer: nlmsghdr, inet_diag_msg (family, state, timer, retrans, the socket id,
# expires, rqueue, wqueue, uid, inode).
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSGHDR = struct.Struct("=IHHII")
_DIAG_REQUEST = struct.Struct("=BBBxI")
_DIAG_PORTS = struct.Struct("!HH")
_DIAG_ANY_COOKIE = struct.Struct("=III").pack(0, 0xFFFFFFFF, 0xFFFFFFFF)  # interface 0, no cookie
_DIAG_ANSWER = struct.Struct("=BBxx4s16s16s24xII")  # family, state, ports, src, dst, uid, inode
_TCP_LISTEN = 10
_Ip = ipaddress.IPv4Address | ipaddress.IPv6Address


def loopback_tcp_peer_uid(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the process-held socket at the client end of a loopback TCP connection.

    TCP carries no credentials, but on one machine the kernel holds both ends: asked
    through sock_diag for exactly the socket whose local address is the client's and
    remote address the server's, it names the uid that created it. None when no open
    socket answers to that: reset, closed (a TIME_WAIT or orphaned socket has no
    owner), a listener that merely shares the port, or no Linux sock_diag to ask.
    Callers must refuse on None. One netlink round trip, answered within send().
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        client_ip, server_ip = ipaddress.ip_address(client[0]), ipaddress.ip_address(server[0])
    except ValueError:
        return None
    family = socket.AF_INET6 if client_ip.version == 6 else socket.AF_INET
    request = (
        _DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0xFFFFFFFF)
        + _DIAG_PORTS.pack(client[1], server[1])
        + client_ip.packed.ljust(16, b"\0")
        + server_ip.packed.ljust(16, b"\0")
        + _DIAG_ANY_COOKIE
    )
    header = _NLMSGHDR.pack(
        _NLMSGHDR.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0
    )
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as diag:
            diag.send(header + request)
            answer = diag.recv(8192, socket.MSG_DONTWAIT)
    except OSError:
        return None
    wanted = (_unmapped(client_ip), _unmapped(server_ip), (client[1], server[1]))
    return _owner_in_answer(answer, wanted)


def _owner_in_answer(answer: bytes, wanted: tuple[_Ip, _Ip, tuple[int, int]]) -> int | None:
    """The uid in a sock_diag answer, if it describes the wanted open, connected socket."""
    if len(answer) < _NLMSGHDR.size + _DIAG_ANSWER.size:
        return None
    if _NLMSGHDR.unpack_from(answer)[1] != _SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket
    family, state, ports, src, dst, uid, inode = _DIAG_ANSWER.unpack_from(answer, _NLMSGHDR.size)
    found = (_diag_ip(family, src), _diag_ip(family, dst), _DIAG_PORTS.unpack(ports))
    if state == _TCP_LISTEN or inode == 0 or found != wanted:
        return None
    return int(uid)


def _diag_ip(family: int, raw: bytes) -> _Ip:
    """An address as sock_diag reports it, IPv4-mapped IPv6 seen as the IPv4 it is."""
    if family == socket.AF_INET:
        return ipaddress.IPv4Address(raw[:4])
    return _unmapped(ipaddress.IPv6Address(raw))


def _unmapped(ip: _Ip) -> _Ip:
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return mapped or ip
