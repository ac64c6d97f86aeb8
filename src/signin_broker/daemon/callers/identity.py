"""Who is calling: the kernel's account of a connection, and the app identity built on it.

The transport (transport.py) calls `identify_caller` on each accepted connection
before it reads a byte, and keeps the answer with that connection for its whole life;
handlers read it with `transport.current_caller()`.

What can be trusted, and how far:
- uid, gid and pid come from the kernel (SO_PEERCRED), recorded at connect(); the peer
  cannot change them.
- A sandbox's own label is sound: a Flatpak app's id from `/.flatpak-info` in its
  mount namespace (read through /proc/<pid>/root, as xdg-desktop-portal does), a
  Snap's from its AppArmor label (SO_PEERSEC). A confined app cannot change either.
- For an unconfined process the executable and script are advisory: any program of
  the same uid can ptrace, LD_PRELOAD, or exec another program between connect() and
  the daemon's look. What can be made sound is: the pid is the caller (pinned by a
  pidfd, else by its start time), a caller that cannot be identified has no app id and
  never gets a default "allow", a relative script path is not trusted for a pin, and a
  path read in /proc is taken only where it names the daemon's own file (a program of
  a mount namespace of the caller's own is refused: file_system_view).
- A browser extension is the broker's native host started by a known browser
  (browsers.py); a caller that claims to be the host otherwise is refused with the reason.
"""

from __future__ import annotations

import configparser
import errno
import logging
import os
import re
import signal
import socket
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...identities import AppId, AppKind
from ..logs import Throttled
from .browsers import BrowserHosts, NotFromABrowser, known_browsers
from .file_system_view import DELETED, NotTheDaemonsFile, check_same_view, running_program
from .forwarded import ForwardConnection, ForwardGrant
from .peercred import open_peer_pidfd, read_peer_credentials

log = logging.getLogger(__name__)
# Whoever runs such callers decides how often: each said a few times a minute at most.
_REFUSED = {
    NotFromABrowser: Throttled(
        log, "refused a caller that claims to be the native host of a browser extension"
    ),
    NotTheDaemonsFile: Throttled(
        log, "refused a caller whose program's path names another file for the daemon"
    ),
}

# Linux: the peer's LSM label at connect() (AppArmor, SELinux), e.g. "snap.app.cmd (enforce)".
SO_PEERSEC = getattr(socket, "SO_PEERSEC", 31)
MAX_FLATPAK_INFO_BYTES = 64 * 1024
FLATPAK_APP_ID = re.compile(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*){2,}")
# Only an enforced profile confines: "complain" (a snap in devmode) only logs.
SNAP_LABEL = re.compile(r"snap\.([a-z0-9](?:-?[a-z0-9])*)\.[\w.+-]+ \(enforce\)")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class Caller:
    """The process behind a connection, as the kernel and /proc describe it."""

    uid: int
    gid: int
    pid: int  # 0 where the platform cannot tell
    executable: str  # "" where it could not be read safely
    connection: int  # the daemon's sequence number of the connection, for logs
    script: str = ""  # what an interpreter runs (see script_of); "" for a native program
    sandbox: AppId | None = None  # the app id, when a sandbox, forward or browser vouches for it
    script_is_absolute: bool = True  # False: the script's path depends on the cwd at start
    forward: ForwardConnection | None = None  # set on a forward's connection (forwarded.py)
    refusal: str = ""  # why a caller that claims an identity it cannot have has none
    # The app's identity for policy and audit ("" when it could not be identified): the
    # sandbox's app id, else the program's. Written once: each call reads it several times.
    app: str = field(init=False)

    def __post_init__(self) -> None:
        app = self.sandbox or AppId(AppKind.PROGRAM, self.executable, self.script)
        object.__setattr__(self, "app", "" if self.refusal else str(app))

    @property
    def browser(self) -> bool:
        """Whether the caller is a browser extension, through the broker's native host."""
        return self.sandbox is not None and self.sandbox.kind is AppKind.BROWSER

    @property
    def identified(self) -> bool:
        """Whether the caller has an app identity at all (else nothing allows it by default)."""
        return bool(self.app)


def identify_caller(
    sock: socket.socket, connection: int, browsers: BrowserHosts | None = None
) -> Caller:
    """Read the caller's kernel credentials and app identity from an accepted connection.

    `browsers`: which callers are browser extensions (by default the known browsers only).
    """
    browsers = browsers or known_browsers()
    accepted_at_ticks = int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLOCK_TICKS)
    creds = read_peer_credentials(sock)
    if not creds.pid or creds.uid != os.geteuid():
        return Caller(creds.uid, creds.gid, creds.pid or 0, "", connection)
    pidfd = open_peer_pidfd(sock)
    try:
        program = _program_of(creds.pid, pidfd, accepted_at_ticks, _peer_label(sock), browsers)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if program is None:
        return Caller(creds.uid, creds.gid, creds.pid, "", connection)
    if program.refusal is not None:
        _REFUSED[type(program.refusal)].warn(
            caller_pid=creds.pid, connection=connection, reason=str(program.refusal)
        )
    return Caller(
        creds.uid,
        creds.gid,
        creds.pid,
        program.executable,
        connection,
        program.script,
        program.sandbox,
        program.absolute,
        refusal=str(program.refusal or ""),
    )


def identify_forwarded(sock: socket.socket, connection: int, grant: ForwardGrant) -> Caller:
    """A connection on a forward: the app `forward:<name>`, whatever process it is.

    The peer's program is read where the daemon may (a hint for the audit, never an
    identity: through ssh it is the ssh client, in a container anything).
    """
    creds = read_peer_credentials(sock)
    try:
        hint = running_program(creds.pid) if creds.pid else ""
    except NotTheDaemonsFile as error:
        hint = f"{error.path} (as another mount namespace names it)"
    except OSError:
        hint = ""
    return Caller(
        creds.uid,
        creds.gid,
        creds.pid or 0,
        hint,
        connection,
        sandbox=AppId(AppKind.FORWARD, grant.name),
        forward=ForwardConnection(grant),
    )


@dataclass(frozen=True, slots=True)
class _Program:
    """What a caller runs, as far as the daemon can tell (see Caller)."""

    executable: str
    script: str = ""
    sandbox: AppId | None = None
    absolute: bool = True
    refusal: NotFromABrowser | NotTheDaemonsFile | None = None


def _program_of(
    pid: int, pidfd: int | None, accepted_at_ticks: int, label: str, browsers: BrowserHosts
) -> _Program | None:
    """What pid runs, or a refusal; None unless pid is the caller and could be read.

    The pid could be reused between connect() and this read. A pidfd pins the
    process: if it is still alive after the read, the pid was not reused. Without one
    (Linux before 6.5), a process that started at or after the accept, in the kernel's
    own clock ticks, cannot be trusted to be the caller.
    """
    try:
        if pidfd is None and _start_ticks(pid) >= accepted_at_ticks:
            return None
        sandbox = _sandbox_of(pid, label)
        try:
            program = _read_program(pid, sandbox, browsers)
        except (NotTheDaemonsFile, NotFromABrowser) as refusal:
            program = _Program("", refusal=refusal)
    except (OSError, ValueError, UnidentifiableSandbox) as error:
        log.debug("caller cannot be identified", extra={"pid": pid, "reason": str(error)})
        return None
    if pidfd is not None and not _is_alive(pidfd):
        return None
    return program


def _read_program(pid: int, sandbox: AppId | None, browsers: BrowserHosts) -> _Program:
    """The program and script of pid; a refusal (raised) where they are not what they say.

    A sandbox's own paths are shown, never taken for an identity; an unconfined
    process's must name the daemon's own files (file_system_view).
    """
    if sandbox is not None:
        executable = os.readlink(f"/proc/{pid}/exe").removesuffix(DELETED)  # noqa: PTH115
    else:
        executable = running_program(pid)
    if not INTERPRETER.fullmatch(Path(executable).name):
        return _Program(executable, sandbox=sandbox)
    cmdline = _read_small(f"/proc/{pid}/cmdline").split(b"\0")
    arguments = [part.decode("utf-8", "surrogateescape") for part in cmdline if part]
    script = script_of(arguments, os.readlink(f"/proc/{pid}/cwd"))  # noqa: PTH115
    absolute = _named_absolutely(arguments)
    if sandbox is None and script:
        check_same_view(pid, script)
        passed = browsers.claimed(script, _after_script(arguments))
        if passed is not None:
            sandbox = browsers.extension(script, absolute, passed, _parent_of(pid))
    return _Program(executable, script, sandbox, absolute)


def _parent_of(pid: int) -> str:
    """The program of pid's parent process, as the daemon finds it ("" when it cannot tell).

    The parent is pinned by a pidfd while its executable is read, and pid must still be
    its child afterwards: a parent that exited (the host then belongs to a reaper) or a
    reused pid names nobody. A parent whose program is not the daemon's file at that
    path is named with the reason, and is no browser.
    """
    parent = _parent_pid(pid)
    try:
        parent_fd = os.pidfd_open(parent)
    except OSError:
        return ""
    try:
        try:
            executable = running_program(parent)
        except NotTheDaemonsFile as error:
            executable = f"{error.path} as another mount namespace names it"
        if _parent_pid(pid) != parent or not _is_alive(parent_fd):
            return ""
    except OSError:
        return ""
    finally:
        os.close(parent_fd)
    return executable


def _parent_pid(pid: int) -> int:
    """The process id of pid's parent (/proc/<pid>/stat field 4)."""
    stat_line = _read_small(f"/proc/{pid}/stat")
    return int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])


class UnidentifiableSandbox(Exception):
    """The process claims a sandbox whose identity cannot be read soundly."""


def _sandbox_of(pid: int, label: str) -> AppId | None:
    """The app id a sandbox vouches for (Flatpak's, Snap's), else None: no sandbox."""
    snap = SNAP_LABEL.fullmatch(label)
    if snap:
        return AppId(AppKind.SNAP, snap.group(1))
    if _on_fuse(pid, ("/", "/.flatpak-info")):  # a FUSE server could stall our open()
        raise UnidentifiableSandbox("the process's root is on a FUSE file system")
    try:
        root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:  # gone, or not ours to look into: never "unconfined"
        raise UnidentifiableSandbox(f"cannot open the process's root: {error.strerror}") from None
    try:
        info = os.open(
            ".flatpak-info",
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY,
            dir_fd=root,
        )
    except FileNotFoundError:
        return None  # not in a Flatpak sandbox
    except OSError as error:
        raise UnidentifiableSandbox(f".flatpak-info cannot be read: {error.strerror}") from None
    finally:
        os.close(root)
    try:
        return AppId(AppKind.FLATPAK, _flatpak_app_id(info))
    finally:
        os.close(info)


def _on_fuse(pid: int, mount_points: tuple[str, ...]) -> bool:
    """Whether any of these mount points of pid's mount namespace is a FUSE file system.

    Read from /proc/<pid>/mountinfo, which the kernel answers without asking any
    file system (a look at the files themselves could wait on a FUSE server forever).
    """
    for line in (
        _read_small(f"/proc/{pid}/mountinfo", 1 << 22).decode(errors="replace").splitlines()
    ):
        fields, _, rest = line.partition(" - ")
        parts = fields.split(" ")
        if len(parts) > 4 and parts[4] in mount_points and rest.startswith("fuse"):
            return True
    return False


def _flatpak_app_id(fd: int) -> str:
    """The app id in an open `.flatpak-info` (a regular file of bounded size), or raise."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FLATPAK_INFO_BYTES:
        raise UnidentifiableSandbox(".flatpak-info is not a small regular file")
    text = os.read(fd, MAX_FLATPAK_INFO_BYTES + 1).decode("utf-8", "replace")
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        raise UnidentifiableSandbox(f".flatpak-info does not parse: {error}") from None
    section = "Runtime" if parser.has_section("Runtime") else "Application"
    app_id = parser.get(section, "name", fallback="")
    if not FLATPAK_APP_ID.fullmatch(app_id):
        raise UnidentifiableSandbox(f".flatpak-info names no valid app id ({app_id[:80]!r})")
    return app_id


def _peer_label(sock: socket.socket) -> str:
    """The peer's LSM label (e.g. AppArmor's), or "" where the kernel keeps none."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERSEC, 256)
    except OSError as error:
        if error.errno not in (errno.ENOPROTOOPT, errno.EINVAL, errno.ENOTSUP):
            log.debug("SO_PEERSEC failed", extra={"reason": error.strerror})
        return ""
    return raw.rstrip(b"\0").decode("utf-8", "replace")


def _start_ticks(pid: int) -> int:
    """When pid started, in clock ticks since boot (/proc/<pid>/stat field 22)."""
    stat_line = _read_small(f"/proc/{pid}/stat")
    after_name = stat_line[stat_line.rindex(b")") + 2 :].split()
    return int(after_name[19])  # fields 3.. follow the name; starttime is field 22


def _read_small(path: str, limit: int = 1 << 16) -> bytes:
    """A /proc file's content, bounded."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    chunks: list[bytes] = []
    size = 0
    try:
        while size < limit and (chunk := os.read(fd, limit - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


# Programs that run someone else's code: the app is the script, not the interpreter.
INTERPRETER = re.compile(
    r"(python|pypy|node|nodejs|perl|ruby|php|lua|gjs|bash|sh|dash|zsh|ksh)[0-9.]*"
)
# Options of these interpreters that take the next argument as their value.
_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs", "-r", "--require"})


def _script_argument(cmdline: Sequence[str]) -> str | None:
    """The argument naming the script ("-m module" for a module), or None (inline code)."""
    return _script_and_rest(cmdline)[0]


def _after_script(cmdline: Sequence[str]) -> list[str]:
    """The arguments the script is given (those after it); none for inline code."""
    return _script_and_rest(cmdline)[1]


def _script_and_rest(cmdline: Sequence[str]) -> tuple[str | None, list[str]]:
    """The argument naming the script (or None), and the arguments after it."""
    arguments = iter(cmdline[1:])
    for argument in arguments:
        if argument in ("-c", "-e", "--eval", "-"):
            return None, []
        if argument == "-m":
            return f"-m {next(arguments, '')}".rstrip(), list(arguments)
        if argument.startswith("-m") and not argument.startswith("--"):
            return f"-m {argument[2:]}", list(arguments)
        if argument in _OPTIONS_WITH_VALUE:
            next(arguments, None)
        elif not argument.startswith("-"):
            return argument, list(arguments)
    return None, []


def script_of(cmdline: Sequence[str], cwd: str) -> str:
    """The script an interpreter's command line runs: an absolute path, or "-m module".

    The command line is what the process says about itself, unlike the executable,
    which the kernel reports; policy keyed on it separates well-behaved apps that
    share an interpreter, and is no defence against code already running as the user.
    Inline code (-c, -e) has no script and so is identified by the interpreter alone.
    """
    argument = _script_argument(cmdline)
    if argument is None or argument.startswith("-m"):
        return argument or ""
    return os.path.normpath(Path(cwd, argument))


def _named_absolutely(cmdline: Sequence[str]) -> bool:
    """Whether the script was named by an absolute path (or there is none).

    A relative one depends on the cwd at start, which the process may have changed
    since: no pin can rest on it. Nor on one with a `..`: the kernel resolves it after
    following any symlink before it, so `/tmp/link/../../opt/app.py` can run a file
    other than the /opt/app.py its text names.
    """
    argument = _script_argument(cmdline)
    if argument is None or argument.startswith("-m"):
        return True
    return argument.startswith("/") and ".." not in argument.split("/")


def _is_alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but not ours to signal
        return True
    return True
