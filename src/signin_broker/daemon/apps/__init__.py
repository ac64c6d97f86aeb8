"""Which app may have what: the user's policy file, and the decisions and asks on it."""
