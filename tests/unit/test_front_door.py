"""The daemon reaches the sessions through their front door (session.manager) only.

The gRPC servicer, the pages and the daemon's start and stop translate requests and
answers, through the rooms SessionManager opens (tokens, step_ups, sign_ins, endings,
names, overview); what the rooms are made of (the registry, the saved state, the
providers' health, the event bus) stays behind them, so that it can change without them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import signin_broker.daemon

DAEMON = Path(signin_broker.daemon.__file__).parent
PARTS = {"registry", "saving", "health", "events", "aliases"}


def reaches_behind(tree: ast.AST) -> list[str]:
    """`session.<part>` or `self._session.<part>`, wherever it is written."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr.lstrip("_") not in PARTS:
            continue
        holder = node.value
        name = holder.attr if isinstance(holder, ast.Attribute) else getattr(holder, "id", "")
        if name.lstrip("_") == "session":
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_daemon_module_reaches_behind_the_sessions_front_door() -> None:
    offenders = {
        str(path.relative_to(DAEMON)): found
        for path in sorted(DAEMON.rglob("*.py"))
        if (found := reaches_behind(ast.parse(path.read_text())))
    }
    assert offenders == {}


def test_the_check_sees_a_reach_behind_the_door() -> None:
    written = "async def f(self):\n    await self._session.registry.resolve('', ALL)\n"
    assert reaches_behind(ast.parse(written)) == ["line 2: self._session.registry"]
    assert reaches_behind(ast.parse("session._events.publish(x)")) == ["line 1: session._events"]
    assert reaches_behind(ast.parse("session.overview.accounts()")) == []
