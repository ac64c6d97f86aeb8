"""The identity providers: each one configured, its half of each sign-in, DPoP, revocation."""
