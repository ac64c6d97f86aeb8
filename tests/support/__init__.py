"""Helpers for the test suite: real daemon processes, privilege drops, skips that CI forbids."""
