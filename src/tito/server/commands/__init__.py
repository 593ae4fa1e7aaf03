"""The server's commands: building a server from `tito serve` options and running it, `tito demo`,
`tito verify-session`, `tito inspect`.

Imports nothing from tito.
"""
