"""``python -m irforge.cli ...`` runs the ``irforge`` command."""

import sys

from .main import irforge_main

sys.exit(irforge_main())
