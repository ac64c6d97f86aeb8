"""The OAuth side of the daemon: accounts, their tokens, and the events they produce."""
