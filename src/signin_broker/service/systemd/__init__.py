"""The systemd user units (a socket and its service) that `install-service` writes on Linux."""
