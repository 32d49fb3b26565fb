"""``python -m model``: the command line (see :mod:`model.cli`)."""

from .cli import main

raise SystemExit(main())
