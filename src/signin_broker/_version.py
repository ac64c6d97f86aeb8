"""The package version, kept in one place (read by the build and at run time)."""

__version__ = "0.1.0"
