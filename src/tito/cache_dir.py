"""Where tito keeps what it builds once (tokenizers, converted models): `$TITO_CACHE_DIR`, else the user cache.

Imports nothing from tito.
"""

from __future__ import annotations

import os
from pathlib import Path


def tito_cache_dir() -> Path:
    """`$TITO_CACHE_DIR`, else `$XDG_CACHE_HOME/tito`, else `~/.cache/tito` (not created here)."""
    root = os.environ.get("TITO_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "tito")
    return Path(root).expanduser()
