"""The contract's sign-in conformance cases, runnable from an installed wheel.

`signin-broker conformance --surface web` runs T1-T8, I1-I3 and N1-N4 on one surface
against a stub provider (I1 and I2 against a given issuer), records the registry row,
and renders the grid of every surface. The pytest suites test the same behaviour in
more depth; this package is what a release pipeline gates on.
"""
