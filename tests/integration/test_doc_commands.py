"""Every shell block of the start and how-to pages runs, as written, or says why it cannot.

Documentation is code: each ```sh, ```bash or ```console block of docs/start and
docs/how-to runs in bash against a real stub provider and a real daemon signed in to it,
reached where a person's is (`$XDG_RUNTIME_DIR/signin-broker/broker.sock`), in a home
folder of its own. An `sh` block must exit 0; each `$ ` command of a `console` block must
print what the page shows under it (`...` matches any text, as in doctest). A block no
test can run carries its reason on the line above it, `<!-- not run: REASON -->`, and is
counted as skipped with it. See docs/development.md, "Commands in the pages".

Names that stand for the reader's own things are served by the test: the provider
`https://id.example.com` is the stub, the API `https://api.example.com/me` is the stub's
userinfo endpoint (it takes the token or answers 401), and `./deploy.sh` is a script in
the block's folder that calls it with the token `exec` put in its environment. What the
commands print reads the person's runtime folder as `/run/user/1000`.
"""

from __future__ import annotations

import contextlib
import doctest
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker_testing import StubProvider, forks
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support import site
from support.commands import BIN
from support.signin import signed_in_daemon

PAGES = sorted([*(site.DOCS / "start").glob("*.md"), *(site.DOCS / "how-to").glob("*.md")])
WITH_BLOCKS = [page for page in PAGES if site.shell_blocks(page)]
API = "https://api.example.com/me"
ISSUER = "https://id.example.com"
RUNTIME = "/run/user/1000"
MARK = "@@doc-block"
CHECKER = doctest.OutputChecker()
DEPLOY = """#!/bin/sh
# deploy.sh as the pages use it: calls the API with the token exec handed it.
token=${SIGNIN_BROKER_TOKEN:-$API_TOKEN}
exec curl -sf -o /dev/null -H "Authorization: ${SIGNIN_BROKER_TOKEN_TYPE:-Bearer} $token" "$API"
"""


def runnable(page: Path) -> list[site.Block]:
    return [block for block in site.shell_blocks(page) if not block.not_run]


@pytest.fixture(scope="module")
def person(shared_stub: StubProvider) -> Iterator[tuple[DaemonProcess, dict[str, str]]]:
    """A signed-in daemon where a person's is, and the environment of that person's shell.

    The daemon is exec'd, not forked: the doctor reads its command line from /proc.
    """
    folder = short_temp_dir()
    runtime, home = folder / "run", folder / "home"
    runtime.mkdir(mode=0o700)
    home.mkdir()
    with pytest.MonkeyPatch.context() as patch:  # its command line for the doctor to read
        patch.setenv(forks.SWITCH, "0")
        daemon = signed_in_daemon(shared_stub, runtime / "signin-broker" / "broker.sock")
    env = {k: v for k, v in daemon.env.items() if not k.startswith("SIGNIN_BROKER_")}
    env |= {
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "API": f"{shared_stub.issuer}/oauth/v2/userinfo",
        "ISSUER": shared_stub.issuer,
    }
    yield daemon, env
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def served(text: str, env: dict[str, str]) -> str:
    """A page's text with the test's stand-ins for the reader's provider and API."""
    return text.replace(API, env["API"]).replace(ISSUER, env["ISSUER"])


# A failed signin-broker inside `$(...)` or `eval "$(...)"` leaves bash's status 0: every
# one is written down, and an sh block in which one failed fails.
RECORD_FAILURES = """failed=$(mktemp)
signin-broker() {
  command signin-broker "$@" || { s=$?; echo "signin-broker $* (exit $s)" >>"$failed"; return $s; }
}
"""
NONE_FAILED = 'if [ -s "$failed" ]; then cat "$failed"; exit 1; fi'


def script(blocks: list[site.Block], env: dict[str, str]) -> str:
    """One bash script of the page's blocks, in order, each announced by a mark line."""
    lines = ["set -euo pipefail", "exec 2>&1", RECORD_FAILURES]
    for n, block in enumerate(blocks):
        if block.label != "console":
            lines += [f"printf '\\n{MARK} {n}\\n'", served(block.body, env), NONE_FAILED]
            continue
        for c, (written, _) in enumerate(block.commands()):
            command = served(written, env)
            lines += [f"printf '\\n{MARK} {n} {c}\\n'", f"{{ {command}\n}} || true", ': >"$failed"']
    lines.append(f"printf '\\n{MARK} end\\n'")
    return "\n".join(lines) + "\n"


def run(blocks: list[site.Block], env: dict[str, str], folder: Path) -> str:
    """Run the page's blocks in one shell in `folder`; everything it printed, with marks.

    The shell leads a process group of its own: what a block left running in the
    background (`&`) ends with it.
    """
    (folder / "deploy.sh").write_text(DEPLOY)
    (folder / "deploy.sh").chmod(0o755)
    shell = subprocess.Popen(
        ["bash", "-c", script(blocks, env)], cwd=folder, env=env,
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        printed, _ = shell.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group ended by itself
            os.killpg(shell.pid, signal.SIGTERM)
    return printed


def outputs(printed: str) -> dict[str, str]:
    """What each block (`n`) or console command (`n c`) printed, by its mark."""
    parts = re.split(rf"^{MARK} (.+)$", printed, flags=re.M)
    marks, texts = parts[1::2], parts[2::2]
    return {mark: text.strip("\n") + "\n" for mark, text in zip(marks, texts, strict=True)}


@pytest.mark.parametrize("page", WITH_BLOCKS, ids=lambda page: str(page.relative_to(site.DOCS)))
def test_every_shell_block_of_the_page_runs_as_written(
    page: Path, person: tuple[DaemonProcess, dict[str, str]], tmp_path: Path
) -> None:
    blocks = runnable(page)
    if not blocks:
        pytest.skip("no block to run: " + "; ".join(b.not_run for b in site.shell_blocks(page)))
    _, env = person
    printed = outputs(run(blocks, env, tmp_path))
    if "end" not in printed:
        last = list(printed)[-1]  # the mark of the block the shell stopped in
        failed = blocks[int(last.split()[0])]
        pytest.fail(f"{failed} failed as written:\n{failed.body}\nit said:\n{printed[last]}")
    for n, block in enumerate(blocks):
        if block.label != "console":
            continue
        for c, (command, page_shows) in enumerate(block.commands()):
            got = printed[f"{n} {c}"].replace(env["XDG_RUNTIME_DIR"], RUNTIME)
            shown = served(page_shows, env)
            flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
            assert CHECKER.check_output(shown, got, flags), (
                f"{block}: `{command}` printed\n{got}\nwhere the page shows\n{shown}"
            )


def test_every_block_not_run_says_why_and_the_stand_ins_are_used() -> None:
    blocks = [block for page in PAGES for block in site.shell_blocks(page)]
    skipped = [block for block in blocks if block.not_run]
    assert all(len(block.not_run.split()) >= 3 for block in skipped), "a reason in words"
    assert len(blocks) - len(skipped) >= 8, "most pages' commands run"
    assert any(API in block.body for block in blocks if not block.not_run)
    assert any("./deploy.sh" in block.body for block in blocks if not block.not_run)
