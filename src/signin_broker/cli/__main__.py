"""`python -m signin_broker.cli`: the `signin-broker` command where its script is not on PATH."""

from .main import run

run()
