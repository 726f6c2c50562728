"""``python -m chronica_core``: the ``chronica`` command (see :mod:`chronica_core.cli`)."""

import sys

from chronica_core.cli import main

sys.exit(main())
