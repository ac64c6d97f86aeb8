"""What the daemon keeps across restarts: encrypted account state, and the keys that open it."""
