"""Fresh tokens: handed out on demand and renewed ahead of time, at a provider that may fail."""
