"""`python3 -m daemon --port N --access-token T` (with tests/testbed/execd on the path)."""

import sys

from .server import main

sys.exit(main(sys.argv[1:]))
