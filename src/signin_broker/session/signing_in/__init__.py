"""Signing in: every sign-in under way and how it ends, and the step-ups token requests wait for."""
