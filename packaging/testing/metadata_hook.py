"""Pins signin-broker-testing to the signin-broker of the same version (one source tree)."""

from __future__ import annotations

from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface


class PinnedToTheBroker(MetadataHookInterface):
    """The stub and the runner import the broker's own modules: versions must match."""

    def update(self, metadata: dict[str, Any]) -> None:
        metadata["dependencies"] = [f"signin-broker=={metadata['version']}"]
