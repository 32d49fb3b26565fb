"""The deployment: the trust boundary for requests, figure export (PNG/HTML/CSV), offline Chromium
and the gunicorn worker."""
