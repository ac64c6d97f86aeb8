"""The user's sessions with their identity providers: sign-in, accounts, fresh tokens, events."""
