"""What the daemon keeps on disk across restarts: encrypted accounts, their keys, the audit log."""
