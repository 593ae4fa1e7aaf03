"""Several tito processes: journal ownership and takeover, `--workers`, the nginx router config, router release of ended
sessions, and `GET /load`.

Imports nothing from tito.
"""
