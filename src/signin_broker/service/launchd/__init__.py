"""The launchd agent that `install-service` writes on macOS."""
