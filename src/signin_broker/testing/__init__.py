"""The old name of the test tooling, kept for one release: it is `signin_broker_testing` now.

`signin_broker.testing` and every submodule under it (`signin_broker.testing.daemon`,
`.browser`, ...) are the very module objects of `signin_broker_testing`, not copies, so
classes and module state are shared whichever name imported them. The tooling is the
signin-broker-testing distribution, a wheel of its own; without it
this package says what to install. Write `signin_broker_testing` in new code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

MISSING_HINT = (
    "the stub provider is test tooling, not part of the base install: install the"
    " signin-broker-testing wheel of the same version beside it (pip install"
    " signin_broker_testing-VERSION-py3-none-any.whl; in the source tree, python -m pip"
    " wheel --no-deps -w dist packaging/testing builds it)"
)
OLD = __name__
NEW = "signin_broker_testing"

warnings.warn(
    "signin_broker.testing is now signin_broker_testing; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)


def _new_module(name: str) -> ModuleType:
    """The tooling's module `name` (an old or a new name), or what to install when absent."""
    target = NEW + name.removeprefix(OLD)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as error:
        if error.name != NEW:
            raise
        raise ModuleNotFoundError(MISSING_HINT, name=name) from None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `signin_broker.testing.X` as the already-imported `signin_broker_testing.X`."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        # __main__ stays this package's own: it runs the stub, or says what to install.
        if not fullname.startswith(OLD + ".") or fullname == OLD + ".__main__":
            return None
        module = _new_module(fullname)
        return importlib.machinery.ModuleSpec(
            fullname, self, is_package=hasattr(module, "__path__")
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _new_module(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran under its new name."""


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> Any:
    """The tooling's public names (StubProvider, ...), from `signin_broker_testing`."""
    if name.startswith("__"):
        raise AttributeError(f"module {OLD!r} has no attribute {name!r}")
    return getattr(_new_module(OLD), name)
