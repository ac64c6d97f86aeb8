"""What a test daemon keeps on disk and in its keyring, read from outside the daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.ledger import SecretLedger


def state_files(socket_path: Path) -> list[Path]:
    return sorted((socket_path.parent / "state" / "signin-broker" / "accounts").glob("*.state"))


def _in_its_environment(daemon: DaemonProcess, code: str, *args: str) -> str:
    """What `code` prints, run with the daemon's environment and its state folder as argv[1]."""
    state = daemon.socket_path.parent / "state" / "signin-broker"
    result = subprocess.run(
        [sys.executable, "-c", code, str(state), *args],
        env=daemon.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout


def key_store_has(daemon: DaemonProcess, name: str) -> bool:
    """Whether the daemon's key store holds this entry: its keyring, as its environment selects
    it, or the key file that stands in for a plaintext one (store.keys.open_key_store)."""
    code = (
        "import sys; from pathlib import Path\n"
        "from signin_broker.store.keys import open_key_store\n"
        "store = open_key_store('keyring', Path(sys.argv[1]))\n"
        "print(store.get(sys.argv[2]) is not None)\n"
    )
    return _in_its_environment(daemon, code, name).strip() == "True"


def decrypted_record(daemon: DaemonProcess, account: str) -> dict[str, Any]:
    """An account's record as the daemon keeps it, decrypted with the key in its key store."""
    code = (
        "import json, sys; from pathlib import Path\n"
        "from signin_broker.store.keys import open_key_store\n"
        "from signin_broker.store.vault import Vault\n"
        "state = Path(sys.argv[1])\n"
        "vault = Vault(state / 'accounts', open_key_store('keyring', state))\n"
        "print(json.dumps(vault.load(sys.argv[2])))\n"
    )
    record: dict[str, Any] = json.loads(_in_its_environment(daemon, code, account))
    key = (record.get("dpop_key") or {}).get("jwk", {})
    SecretLedger.note(key.get("d"))  # searched for in every daemon's log at the suite's end
    return record
