import sys

from metaopt.cli import main

sys.exit(main())
