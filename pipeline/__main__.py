"""``python -m pipeline``: the ``recall`` command line (pipeline.cli.main); exits with its status."""

import sys

from pipeline.cli.main import main

sys.exit(main())
