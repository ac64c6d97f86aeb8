"""Programs built on the SDK the way an app of yours would be, shipped so they can run as is.

`sync_agent`: a headless background service (a user unit, no terminal, no display);
`signin-broker conformance --surface backend` runs it as the contract's backend.
"""
