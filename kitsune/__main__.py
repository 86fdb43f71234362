"""``python -m kitsune``: the command line."""

import sys

from kitsune.cli import main

sys.exit(main())
