"""Immutable result records for the SDK: dataclass-like, but cheap to define.

The SDK's results would naturally be frozen dataclasses, but defining a dataclass
costs about 1.5 ms (it compiles its methods), and the one-shot `signin-broker`
command would pay that for every result type on every run. A Record subclass gets
its fields from its annotations once; type checkers see a frozen dataclass
(PEP 681).
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar, dataclass_transform


@dataclass_transform(frozen_default=True)
class Record:
    """Base of the SDK's results: positional or keyword construction, immutable, comparable.

    Fields named in the class keyword `secret` are left out of repr, so a logged
    result never shows a token. Annotations with a leading "_" are class settings, not fields.
    """

    _fields: ClassVar[tuple[str, ...]] = ()
    _secret: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, secret: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._fields = tuple(name for name in inspect.get_annotations(cls) if name[0] != "_")
        cls._secret = frozenset(secret)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self._fields):
            raise TypeError(f"{type(self).__name__} takes {len(self._fields)} fields")
        values = dict(zip(self._fields, args, strict=False))
        for name, value in kwargs.items():
            if name not in self._fields or name in values:
                raise TypeError(f"{type(self).__name__} got an unexpected or repeated {name!r}")
            values[name] = value
        for name in self._fields:  # a field added later has a default in the class
            if name not in values and hasattr(type(self), name):
                values[name] = getattr(type(self), name)
        missing = [name for name in self._fields if name not in values]
        if missing:
            raise TypeError(f"{type(self).__name__} is missing {', '.join(missing)}")
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._secret
        )
        return f"{type(self).__name__}({shown})"

    def as_dict(self) -> dict[str, Any]:
        """The fields and their values, secrets included (for JSON output)."""
        return dict(zip(self._fields, self._values(), strict=True))
