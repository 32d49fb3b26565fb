"""The command line: ``python -m model`` / ``tperf`` (see :mod:`model.cli.commands`)."""

from .commands import main

__all__ = ["main"]
