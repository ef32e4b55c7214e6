"""``python -m zerg.cli``: the ``zerg`` command, as the installed script runs it."""

import sys

from zerg.cli.main import main

sys.exit(main())
