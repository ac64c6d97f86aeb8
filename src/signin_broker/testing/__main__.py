"""`python -m signin_broker.testing`: the stub provider, or what to install to have it.

This file and __init__.py come with the base install; the rest of the package is
the signin-broker-testing wheel (`signin-broker[testing]`), test tooling that a
daemon, CLI and SDK install does without.
"""

import sys

from . import MISSING_HINT

try:
    from .command import main
except ModuleNotFoundError as error:
    if error.name != f"{__package__}.command":
        raise
    print(f"python -m signin_broker.testing: {MISSING_HINT}", file=sys.stderr)
    sys.exit(2)

sys.exit(main())
