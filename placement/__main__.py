"""``python -m placement``: the same command as the ``placement`` script."""
import sys

from placement.cli import main

sys.exit(main())
