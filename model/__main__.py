"""``python -m model``: the command line (see :mod:`model.cli`)."""

from model.cli import main

raise SystemExit(main())
