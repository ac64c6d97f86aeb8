"""The exec race: what can be sound is that a connection keeps its identity.

An unconfined process can exec another program between its connect() and the daemon's
look, and nothing of the same uid can stop that (the README says so). What the daemon
does promise: the caller read at accept is that connection's caller for its whole
life. Here a denied script connects, and while a forked child keeps making calls on
that connection, the script exec's an allowed program: the calls stay denied.
"""

from __future__ import annotations

import json
from pathlib import Path

from signin_broker_testing import StubProvider
from support.apps import write_policy
from support.identity import RELAY, Script, wait_for_files
from support.signin import signed_in_daemon

ROUNDS = 20

# The parent connects, then exec's the allowed program when the child says so; the child
# makes one call on the parent's connection before the exec and three after it.
KEEPER = r"""
import sys, time

socket_path, relay_dir, result, allowed = sys.argv[1:5]
shared = socket.socket(socket.AF_UNIX)
shared.connect(socket_path)
go_read, go_write = os.pipe()
parent = os.getpid()
if os.fork():
    os.close(go_write)
    os.read(go_read, 1)
    os.execv(sys.executable, [sys.executable, allowed, "idle"])
os.close(go_read)
import grpc

with grpc.insecure_channel("unix:" + relay(shared, relay_dir)) as channel:
    first = attempt(channel)
    os.write(go_write, b"x")
    deadline = time.monotonic() + 30
    seen = False
    while not seen and time.monotonic() < deadline:
        with open(f"/proc/{parent}/cmdline", "rb") as cmdline:
            seen = allowed.encode() in cmdline.read()
        time.sleep(0.01)
    later = [attempt(channel) for _ in range(3)]
report(result, {"first": first, "exec_seen": seen, "later": later})
"""

# The allowed program: "call" makes one GetToken of its own; "idle" just lives a while.
ALLOWED = """\
import json, sys, time
from signin_broker.client import BrokerClient

if sys.argv[1] == "call":
    with BrokerClient(sys.argv[2], timeout=20) as broker:
        print(json.dumps({"token": bool(broker.get_token().access_token)}))
else:
    time.sleep(60)
"""


def test_a_connection_keeps_the_identity_read_at_accept_when_its_process_execs(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    keeper = Script(folder / "apps", "keeper", RELAY + KEEPER)
    allowed = Script(folder / "apps", "allowed", ALLOWED)
    write_policy(socket_path, keeper.rule("deny"), allowed.rule("allow"))
    assert allowed.run("call", str(socket_path)) == {"token": True}  # it really is allowed
    relays, results = folder / "relays", folder / "results"
    relays.mkdir()
    results.mkdir()
    paths = [results / f"{round_}.json" for round_ in range(ROUNDS)]
    processes = [
        keeper.start(str(socket_path), str(relays), str(path), str(allowed.path)) for path in paths
    ]
    try:
        found = wait_for_files(paths)
    finally:
        for process in processes:  # by now each runs the allowed program, idle
            process.kill()
            process.wait(timeout=30)
    assert all(round_["exec_seen"] for round_ in found), found
    calls = [call for round_ in found for call in [round_["first"], *round_["later"]]]
    assert len(calls) == 4 * ROUNDS
    assert not [call for call in calls if call["code"] != "PERMISSION_DENIED"], json.dumps(found)
    assert all(keeper.path.name in call["message"] for call in calls), calls
    assert daemon.alive
    daemon.stop()
