"""python -m hpcnet.testbed ..."""
import sys

from hpcnet.testbed.cli import main

sys.exit(main())
