"""Signing out: sessions ended and removed, the default chosen, the provider's logout."""
