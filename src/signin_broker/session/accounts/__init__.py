"""Accounts and names: their records, the one registry that keeps and replaces them, their names."""
