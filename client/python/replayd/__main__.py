"""``python3 -m replayd``: the replayd-cli command line (see replayd.cli)."""
import sys

from .cli import main

sys.exit(main())
