"""`python -m opensandbox_core._doctor` runs `opensandbox-doctor`."""

import sys

from ._cli import main

sys.exit(main())
