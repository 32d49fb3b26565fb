"""The command line: ``python -m model`` / ``tperf`` (see :mod:`model.cli.commands`)."""

from model.cli.commands import console, main

__all__ = ["console", "main"]
