"""The contract's sign-in conformance cases, in the signin-broker-testing wheel for release gates.

`signin-broker conformance --surface web` runs T1-T8, I1-I3 and N1-N4 on one surface
against a stub provider (I1 and I2 against a given issuer) from an installed wheel,
records the registry row, and renders the grid of every surface. It drives the daemon
from outside, as an app and a browser would: through the SDK, the CLI and HTTP.
"""
