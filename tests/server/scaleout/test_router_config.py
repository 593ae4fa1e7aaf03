"""The nginx config tito writes: nginx itself accepts it, and it routes by the session id with a minted id for
session creation (the routing itself runs in tests/server/test_scale_out.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_BINARIES, unavailable
from tests.server.cluster import NGINX
from tito.server.scaleout.router_config import nginx_config


def test_the_config_hashes_sessions_and_hands_the_minted_id_to_tito() -> None:
    config = nginx_config(["127.0.0.1:8001", "127.0.0.1:8002"], "127.0.0.1:8000")
    assert "hash $tito_session_key consistent;" in config
    assert "~^/sessions/(?<tito_session_id>[^/]+) $tito_session_id;" in config
    assert "proxy_set_header X-Tito-Session-Id $request_id;" in config
    assert config.count("server 127.0.0.1:800") == 2 and "listen 127.0.0.1:8000;" in config
    assert "tito_engines" not in config and "{{" not in config


def test_engines_are_routed_by_the_sessions_routing_key_when_asked() -> None:
    config = nginx_config(["127.0.0.1:8001"], "127.0.0.1:8000", engine_addresses=["127.0.0.1:9001"],
                          engine_listen="127.0.0.1:9000")  # fmt: skip
    assert "hash $http_x_smg_routing_key consistent;" in config and "listen 127.0.0.1:9000;" in config
    with pytest.raises(ValueError, match="go together"):
        nginx_config(["127.0.0.1:8001"], "127.0.0.1:8000", engine_addresses=["127.0.0.1:9001"])


def test_nginx_accepts_the_config(tmp_path: Path) -> None:
    if NGINX is None:
        unavailable("nginx is not installed (apt-get install nginx; .ci/run installs it)", REQUIRE_BINARIES)
    config = nginx_config(["127.0.0.1:8001", "127.0.0.1:8002"], "127.0.0.1:8000", engine_addresses=["127.0.0.1:9001"],
                          engine_listen="127.0.0.1:9000")  # fmt: skip
    (tmp_path / "nginx.conf").write_text(config)
    checked = subprocess.run([str(NGINX), "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e",
                              "stderr"], capture_output=True, text=True, timeout=30)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
