"""nginx configuration for tito processes behind a router: sticky by session id, engines sticky by routing key.

The config is `templates/nginx.conf` (shipped with the package) with its slots filled; its paths (pid, temp
directories, error log) are relative, so `nginx -p DIR -c FILE` keeps everything under DIR.

Imports nothing from tito.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib.resources import files

_SLOT = re.compile(r"{{(\w+)}}")


def nginx_config(
    tito_addresses: Sequence[str],
    listen: str,
    *,
    engine_addresses: Sequence[str] = (),
    engine_listen: str | None = None,
    read_timeout_s: float = 600.0,
    max_body_bytes: int = 64 * 1024 * 1024,
    nginx_workers: str = "auto",
    user: str | None = None,
    error_log: str = "error.log",
) -> str:
    """A whole nginx.conf: `listen` (e.g. `127.0.0.1:8000`) routes to `tito_addresses` by session id; with
    `engine_addresses`, `engine_listen` routes engine requests by the session's routing key."""
    if not tito_addresses:
        raise ValueError("nginx_config needs at least one tito address")
    if bool(engine_addresses) != (engine_listen is not None):
        raise ValueError("nginx_config: engine_addresses and engine_listen go together")
    timeout = f"{max(1, round(read_timeout_s))}s"
    engine_router = ""
    if engine_addresses:
        engine_router = _fill(
            _template("nginx_engines.conf"),
            engine_servers=_servers(engine_addresses),
            engine_listen=str(engine_listen),
            read_timeout=timeout,
        )
    return _fill(
        _template("nginx.conf"),
        process_count=str(len(tito_addresses)),
        nginx_workers=nginx_workers,
        user=f"user {user};\n" if user else "",
        error_log=error_log,
        max_body=str(max_body_bytes),
        tito_servers=_servers(tito_addresses),
        listen=listen,
        read_timeout=timeout,
        engine_router=engine_router,
    )


def _servers(addresses: Sequence[str]) -> str:
    # max_fails=0: a process is never marked down for a while after one error (its sessions would go elsewhere
    # while it still holds them); a refused connection still moves that one request on (proxy_next_upstream).
    return "\n".join(f"        server {address} max_fails=0;" for address in addresses)


def _template(name: str) -> str:
    return files("tito.server.scaleout").joinpath("templates", name).read_text()


def _fill(template: str, **values: str) -> str:
    missing = set(_SLOT.findall(template)) - values.keys()
    if missing:
        raise KeyError(f"nginx template slots without a value: {sorted(missing)}")
    return _SLOT.sub(lambda match: values[match.group(1)], template)
