"""The site builds from the docs extra alone: `pip install '.[docs]'`, then `mkdocs build --strict`.

The README says so, and the API reference once needed the protobuf compiler of the dev
tools. The tree is copied without anything a build generates, so the generated modules
and broker.protoset come from the package's own build, as on a fresh clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.installer import new_venv, pip
from support.site import ROOT

# What the build of the package and of the site reads; nothing a build writes.
SOURCES = ["pyproject.toml", "hatch_build.py", "README.md", "mkdocs.yml", "scripts/docs_hooks.py"]
FOLDERS = ["src", "proto", "man", "docs"]
GENERATED = shutil.ignore_patterns(
    "__pycache__", "*_pb2*.py", "*_pb2*.pyi", "*.protoset", "*.egg-info"
)


@pytest.mark.external
def test_the_docs_extra_alone_builds_the_site_strictly(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for name in SOURCES:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    for name in FOLDERS:
        shutil.copytree(ROOT / name, tree / name, ignore=GENERATED)
    (tree / "src" / "signin_broker" / "v1" / "broker.proto").unlink(missing_ok=True)
    python = new_venv(tmp_path / "venv")
    installed = pip(python, "install", f"{tree}[docs]")
    assert installed.returncode == 0, installed.stderr
    assert pip(python, "show", "grpcio-tools").returncode != 0  # not brought by the extra
    built = subprocess.run(
        [str(python.parent / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tree, env={**os.environ, "PYTHONPATH": "", "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "step-up sign-in required" in api  # the comments, from the build's broker.protoset
    assert "get_token" in (tmp_path / "site" / "reference" / "sdk" / "index.html").read_text()
