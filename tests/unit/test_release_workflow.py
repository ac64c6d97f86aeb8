"""The release workflow (.github/workflows/release.yml), which runs on GitHub alone: its
shape (a tag starts it; the files are built and checked before the site and the release
are published; what each action needs), and every file and script it names is here."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the docs extra (mkdocs)")

REPO = Path(__file__).parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
TREE_PATH = re.compile(r"(?<![\w/.-])\.?/?((?:scripts|packaging|src|docs|tests|\.ci)/[\w./-]+)")


def workflow() -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads a bare `on` as true
    return loaded


def steps(job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow()["jobs"][job]["steps"]
    return found


def runs(job: str) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def uses(job: str) -> list[str]:
    return [step["uses"] for step in steps(job) if "uses" in step]


def test_a_version_tag_starts_it_and_nothing_else() -> None:
    assert workflow()["on"] == {"push": {"tags": ["v*"]}}
    assert workflow()["permissions"] == {"contents": "read"}  # each job asks for more


def test_the_files_are_built_on_debian_12_and_checked_before_anything_is_published() -> None:
    jobs = workflow()["jobs"]
    assert set(jobs) == {"package", "site", "pages", "release"}
    package = jobs["package"]
    assert package["container"]["image"] == "debian:12"  # the .deb's +deb12, its python3
    assert "--privileged" in package["container"]["options"]  # check-deb's user manager
    built = runs("package")
    assert "pip wheel --no-deps -w dist . ./packaging/testing" in built  # both wheels
    assert re.search(r"^scripts/package-deb$", built, re.MULTILINE)  # xz, not --fast
    assert "scripts/check-deb signin-broker_*.deb sbtest" in built
    assert "sha256sum signin_broker-*.whl signin_broker_testing-*.whl signin-broker_*.deb" in built
    assert 'test "v$version" = "$GITHUB_REF_NAME"' in built
    upload = next(step for step in steps("package") if step.get("uses", "").startswith(
        "actions/upload-artifact@"))  # fmt: skip
    assert upload["with"]["name"] == "release-files" and upload["with"]["path"] == "dist/"
    # Published only once the package passed its check, and the site built.
    assert set(jobs["pages"]["needs"]) == {"package", "site"}
    assert set(jobs["release"]["needs"]) == {"package", "site"}


def test_the_site_is_built_from_the_docs_extra_alone_and_deployed_to_pages() -> None:
    site = runs("site")
    assert 'pip install ".[docs]"' in site and "mkdocs build --strict" in site
    upload = next(s for s in steps("site") if s.get("uses", "").startswith("actions/upload-pages"))
    site_dir = re.search(r"^site_dir:\s*(\S+)", (REPO / "mkdocs.yml").read_text(), re.MULTILINE)
    assert upload["with"]["path"] == (site_dir[1] if site_dir else "site")  # what mkdocs writes
    pages = workflow()["jobs"]["pages"]
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}
    assert pages["environment"]["name"] == "github-pages"
    assert [step["uses"] for step in pages["steps"]] == ["actions/deploy-pages@v4"]
    assert pages["steps"][0]["id"] == "deployment"  # the environment's url reads it


def test_the_release_carries_the_two_wheels_the_deb_and_their_checksums() -> None:
    release = workflow()["jobs"]["release"]
    assert release["permissions"] == {"contents": "write"}
    assert "actions/checkout@v4" in uses("release")  # gh release --verify-tag reads git
    download = next(s for s in steps("release") if s.get("uses", "").startswith(
        "actions/download-artifact@"))  # fmt: skip
    assert download["with"] == {"name": "release-files", "path": "dist"}
    published = runs("release")
    assert "sha256sum --check SHA256SUMS" in published
    assert re.search(
        r'gh release create "\$GITHUB_REF_NAME" --verify-tag .*\n.*\n\s*signin_broker-\*\.whl'
        r" signin_broker_testing-\*\.whl signin-broker_\*\.deb SHA256SUMS",
        published,
    ), published
    step = next(s for s in steps("release") if "gh release" in s.get("run", ""))
    assert step["env"] == {"GH_TOKEN": "${{ github.token }}"}


def test_every_action_is_pinned_to_a_major_version() -> None:
    for job in workflow()["jobs"]:
        for action in uses(job):
            assert re.fullmatch(r"actions/[\w-]+@v\d+", action), action


def test_every_file_and_script_it_names_is_in_the_tree() -> None:
    named = set()
    for job in workflow()["jobs"]:
        for match in TREE_PATH.finditer(runs(job)):
            named.add(match[1].rstrip("."))
    assert {"scripts/package-deb", "scripts/check-deb", "packaging/testing"} <= named
    for path in named:
        assert (REPO / path).exists(), f"release.yml names {path}, which is not in the tree"
        if path.startswith("scripts/"):
            assert os.access(REPO / path, os.X_OK), f"{path} is not executable"
    version = (REPO / "src" / "signin_broker" / "_version.py").read_text()
    assert re.search(r'^__version__ = "[^"]+"$', version, re.MULTILINE)  # the tag's check reads it
