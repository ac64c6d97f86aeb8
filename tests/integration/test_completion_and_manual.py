"""Shell completion (argcomplete, through a real bash) and the shipped manual pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.commands import BIN

REPO = Path(__file__).parents[2]


def test_the_manual_pages_match_the_parsers(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "manpages.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    made_pages = sorted(page.name for page in tmp_path.iterdir())
    assert made_pages == ["signin-broker.1", "signin-broker.toml.5", "signin-brokerd.1"]
    assert made_pages == sorted(page.name for page in (REPO / "man").iterdir())
    for page in made_pages:
        assert (tmp_path / page).read_text() == (REPO / "man" / page).read_text(), (
            f"man/{page} is out of date: run `python scripts/manpages.py`"
        )


def candidates(line: str) -> list[str]:
    """What bash offers after `line`, with the script `completion bash` prints loaded."""
    script = (
        f'eval "$({BIN / "signin-broker"} completion bash)"\n'
        f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}\n"
        'read -ra COMP_WORDS <<< "$COMP_LINE"\n'
        '[[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")\n'
        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
        "$(complete -p signin-broker | sed -E 's/.* -F ([^ ]+) .*/\\1/') "
        'signin-broker "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return sorted(word.strip() for word in done.stdout.splitlines() if word.strip())


def test_bash_completes_commands_and_their_options() -> None:
    assert {"token", "git-credential", "docker-credential"} <= set(candidates("signin-broker "))
    assert "--format" in candidates("signin-broker token --f")
    assert candidates("signin-broker token --format e") == ["env", "exec-credential"]


def test_a_plain_run_does_not_load_argcomplete() -> None:
    probe = (
        "import sys\n"
        "from signin_broker.cli.main import main\n"
        "main(['proto'])\n"
        "assert 'argcomplete' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
