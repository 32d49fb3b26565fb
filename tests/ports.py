"""A free loopback port for a test's Dash server.

dash.testing's threaded runner numbers its servers 58050, 58051, … in every pytest process, so
two test sessions on one machine (two worktrees, a test run beside a benchmark's) ask for the
same ports in the same order. The second server's bind fails in its thread, yet the runner's
start-up check can already have reached the *other* session's server on that port and go on
with it: its browser then drives a page served by another process, which stops or restarts
under it (a typed field that never settles, seen once). The OS's choice of a free port (bind to
port 0) takes that away; another process can take the port in the moment between, but no longer
every time a sequence is shared.
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
