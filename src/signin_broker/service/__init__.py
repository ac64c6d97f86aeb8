"""Service-manager files in the wheel, so `signin-broker install-service` can start the daemon."""
