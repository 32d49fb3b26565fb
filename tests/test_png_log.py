"""kaleido's Chromium driver logs a message it cannot decode as an error with a traceback and then
ignores it; the fuzzed-request test (tests/test_hostile_requests.py) found one now and then under
the PNG export. It is recorded once, as one warning line without a traceback."""

from __future__ import annotations

import json
import logging

from dashboard.server import png


def test_an_ignored_decode_error_is_one_warning_line(caplog):
    logger = logging.getLogger("choreographer.channels.pipe")
    png._IgnoredDecodeError.seen = False
    with caplog.at_level(logging.DEBUG, logger="choreographer.channels.pipe"):
        for _ in range(3):
            try:
                json.loads("{not json")
            except json.JSONDecodeError:
                logger.exception("JSONError decoding message. Ignoring")
        logger.error("another error")  # other records pass as they are
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG", "DEBUG", "ERROR"]
    assert all(r.exc_info is None for r in caplog.records[:3])
