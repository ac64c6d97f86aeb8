"""Token files as a test configures and reads them: the config's tables, each format read back.

A reader of a token file knows its format only: `held` reads the token out of the
file as Prometheus, curl -H @file, a JSON reader or a shell sourcing an env file would,
and fails (ValueError) on anything a whole file in that format could not be.
"""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Mapping
from pathlib import Path

FORMATS = ("token", "header", "json", "env")


def config(path: Path, files: Mapping[str, Mapping[str, str]], *lines: str) -> Path:
    """Write a config file with these `[token_files.<name>]` tables after `lines`; its path."""
    tables = [
        f"[token_files.{name}]\n"
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in keys.items())
        for name, keys in files.items()
    ]
    path.write_text("\n".join([*lines, *tables]) + "\n")
    return path


def held(path: Path, form: str) -> str:
    """The token a file of this format holds, read as its readers read it; ValueError if none."""
    text = path.read_text()
    if form == "token":
        token = text
    elif form == "header":
        name, _, value = text.removesuffix("\n").partition(": ")
        scheme, _, token = value.partition(" ")
        if name != "Authorization" or scheme != "Bearer" or "\n" in value:
            raise ValueError(f"not one Authorization header line: {text!r}")
    elif form == "json":
        token = json.loads(text)["access_token"]
    else:
        (assignment,) = shlex.split(text)  # as a shell (or systemd's EnvironmentFile=) reads it
        name, _, token = assignment.partition("=")
        if name != "SIGNIN_BROKER_TOKEN":
            raise ValueError(f"not SIGNIN_BROKER_TOKEN=...: {text!r}")
    if not token or not token.isprintable() or " " in token:
        raise ValueError(f"no token in {path}: {text!r}")
    return token


class Reader:
    """Reads files over and over in a thread, as a program polling them would.

    Every read that finds a file must parse (`bad` keeps those that did not); `tokens`
    keeps the distinct tokens read, `reads` counts the reads that found a file.
    """

    def __init__(self, files: Mapping[Path, str]) -> None:
        self.files = dict(files)
        self.tokens: set[str] = set()
        self.bad: list[str] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _read(self) -> None:
        while not self._stop.is_set():
            for path, form in self.files.items():
                try:
                    self.tokens.add(held(path, form))
                except FileNotFoundError:
                    continue
                except (ValueError, OSError) as error:
                    self.bad.append(f"{path}: {error}")
                self.reads += 1
            self._stop.wait(0.01)
