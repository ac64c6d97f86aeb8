"""`signin-broker proto`: where the API's broker.proto is, for apps in other languages.

The wheel ships it beside the generated Python modules (hatch_build.py), so an app
written in Go, Rust or C++ generates its own client from the installed copy:
`protoc -I "$(dirname "$(signin-broker proto)")" broker.proto ...`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ._failures import EXIT_FAILED, complain

PROTO = Path(__file__).resolve().parents[1] / "v1" / "broker.proto"


def proto(args: argparse.Namespace) -> int:
    """Print the path (or, with --json, {"path": ...})."""
    if not PROTO.is_file():
        complain(f"{PROTO} is missing: this installation was built without it")
        return EXIT_FAILED
    if args.json:
        json.dump({"path": str(PROTO)}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(PROTO)
    return 0
