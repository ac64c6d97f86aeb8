"""The gRPC API on the daemon's socket: the checked server and the servicer behind it."""
