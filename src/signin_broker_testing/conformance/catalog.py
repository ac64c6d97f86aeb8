"""Every surface the grid runs, by name, in the registry's order."""

from __future__ import annotations

from .backend_surface import Backend
from .surfaces import Cli, Desktop, Surface, Tv, Web
from .tui_surface import Tui

BY_NAME: dict[str, Surface] = {
    surface.name: surface for surface in (Web(), Cli(), Desktop(), Tv(), Tui(), Backend())
}
