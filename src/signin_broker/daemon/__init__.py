"""The signin-brokerd process: settings, lifecycle, socket, caller checks, gRPC service."""
