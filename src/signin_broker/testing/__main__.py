"""`python -m signin_broker.testing`: the stub provider, or what to install to have it."""

import sys

from . import MISSING_HINT

try:
    from signin_broker_testing.command import main
except ModuleNotFoundError as error:
    if error.name not in ("signin_broker_testing", "signin_broker_testing.command"):
        raise
    print(f"python -m signin_broker.testing: {MISSING_HINT}", file=sys.stderr)
    sys.exit(2)

sys.exit(main())
