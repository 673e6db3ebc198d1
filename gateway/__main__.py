"""``python -m gateway`` is ``mel-gateway``."""

import sys

from gateway.cli import main

sys.exit(main())
