"""`python -m collector`: the command line (collector/cli/)."""

import sys

from .cli import main

sys.exit(main())
