"""`python -m signin_broker_testing`: the stub provider in the foreground, for a demo."""

import sys

from .command import main

sys.exit(main())
