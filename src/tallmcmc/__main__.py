"""``python -m tallmcmc`` is the same as the ``tallmcmc`` command."""

import sys

from tallmcmc.cli import main

sys.exit(main())
