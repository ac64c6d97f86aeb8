"""The loopback sign-in pages and dashboard, served to the user's own browser only."""
