"""`python -m tito`: the same command line as the `tito` script. Imports nothing from tito but cli."""

from __future__ import annotations

import sys

from tito.cli import main

sys.exit(main())
