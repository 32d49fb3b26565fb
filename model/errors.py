"""The one exception type the estimator raises for bad input.

Every entry point (Python API, CLI, dashboard) catches :class:`ModelError` and shows its message
as it is, so messages name the offending field and the allowed range.
"""


class ModelError(ValueError):
    """Invalid user input: a spec field, a pin, a budget. The message is meant for the user."""
