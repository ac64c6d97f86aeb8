"""`signin-broker conformance`: the installed command runs cases, records rows, draws the grid.

The full run of every surface is a step of scripts/check (its grid is kept as the CI
artifact); these tests run a few cases each, to show what a failure and a skip look like.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from signin_broker_testing import StubProvider
from signin_broker_testing.conformance.registry import CASE_IDS, read
from support.commands import signin_broker

ADMIN_TOKEN_ENV = "SIGNIN_BROKER_CONFORMANCE_ADMIN_TOKEN"


def cells_of(page: str, surface: str) -> dict[str, str]:
    """The grid page's case cells of one surface's row: case id -> CSS class."""
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", page, re.S) if f"<td>{surface}</td>" in r)
    classes = re.findall(r'<td class="(\w+)"', row)
    return dict(zip(CASE_IDS, classes, strict=True))


def test_a_failing_case_is_a_red_cell_and_a_non_zero_exit(
    tmp_path: Path, monkeypatch, stub: StubProvider
) -> None:
    # The staging provider refuses the admin token, so I2 cannot revoke the session: it fails.
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "not-the-admin-token")
    registry, page = tmp_path / "registry.jsonl", tmp_path / "grid.html"
    done = signin_broker(
        "conformance", "--surface", "web", "--case", "I1", "--case", "I2", "--case", "T4",
        "--issuer", stub.issuer, "--registry", str(registry), "--html", str(page),
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    summary = "T1-T8 PASS (T1, T2, T3, T5, T6, T7, T8 SKIP), I1-I3 FAIL (I2), N1-N4 SKIP"
    assert summary in done.stdout
    assert "web I2 FAIL: the provider's admin revoke answered 401" in done.stdout
    (row,) = read(registry)
    assert (row.surface, row.component) == ("web", "signin-broker")
    assert {case: outcome.status for case, outcome in row.cases.items()} == {
        "T4": "PASS",
        "I1": "PASS",
        "I2": "FAIL",
    }
    cells = cells_of(page.read_text(), "web")
    assert cells["I2"] == "fail" and cells["I1"] == "pass" and cells["T1"] == "none"
    assert "td.fail { background: #e05252" in page.read_text()  # the red cell
    assert "not-the-admin-token" not in done.stdout + done.stderr + registry.read_text()


def test_a_case_that_cannot_apply_is_a_skip_with_its_reason_and_the_grid_keeps_every_surface(
    tmp_path: Path,
) -> None:
    registry = tmp_path / "registry.jsonl"
    web = signin_broker(
        "conformance", "--surface", "web", "--case", "N4", "--registry", str(registry),
        timeout=120,
    )  # fmt: skip
    assert web.returncode == 0, web.stderr
    tv = signin_broker(
        "conformance", "--surface", "tv", "--case", "N4", "--case", "I1", "--json",
        "--registry", str(registry), timeout=120,
    )  # fmt: skip
    assert tv.returncode == 0, tv.stderr  # a SKIP does not fail the gate
    (line,) = tv.stdout.splitlines()
    row = json.loads(line)
    assert row["cases"]["N4"]["status"] == "SKIP"
    assert "no redirect_to" in row["cases"]["N4"]["reason"]
    assert row["cases"]["I1"] == {
        "status": "SKIP",
        "reason": "no --issuer given: this case runs against a staging provider",
    }
    terminal = signin_broker(
        "conformance", "--surface", "tui", "--surface", "backend", "--case", "N4", "--json",
        "--registry", str(registry), timeout=120,
    )  # fmt: skip
    assert terminal.returncode == 0, terminal.stderr
    rows = {row["surface"]: row for row in map(json.loads, terminal.stdout.splitlines())}
    assert rows["tui"]["cases"]["N4"] == {
        "status": "SKIP",
        "reason": "a device sign-in never sends a browser back: no redirect_to to forge",
    }
    assert rows["backend"]["cases"]["N4"]["status"] == "PASS"  # its sign-in is the page's
    page = registry.with_suffix(".html").read_text()
    assert cells_of(page, "web")["N4"] == "pass"
    assert cells_of(page, "tv")["N4"] == "skip"
    assert cells_of(page, "tui")["N4"] == "skip"
    assert [r.surface for r in read(registry)] == ["web", "tv", "tui", "backend"]


def test_a_broken_registry_is_reported_before_any_case_runs(tmp_path: Path) -> None:
    registry = tmp_path / "registry.jsonl"
    registry.write_text("not json\n")
    done = signin_broker("conformance", "--surface", "web", "--registry", str(registry))
    assert done.returncode == 2
    assert f"{registry}, line 1" in done.stderr
    assert registry.read_text() == "not json\n"  # nothing appended
