"""`python -m collector.cli`, as `python -m collector` and the `collector` script."""

import sys

from . import main

sys.exit(main())
