"""The opaque round-trip values tito hands out (an Anthropic thinking `signature`, a Responses reasoning item's
`encrypted_content`): they name the committed turn (session, response id) under an HMAC with a per-server key.

A resent block whose value verifies lets the edge put back the stored assistant message of that turn, so an agent
that re-serialised it (tool input key order, spacing) still extends the stored ids exactly. A value that does not
verify (forged, another server's key, another session's) is never trusted: the edge treats it as absent.
The response id is known before the engine's first id, so a stream can sign its thinking block as it closes; an
uncommitted turn's value names no stored turn and finds nothing.

The key is random per process; with `--journal DIR` it is kept in `DIR/signing.key` so values survive a restart.

Imports nothing from tito.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from pathlib import Path

PREFIX = "tito1"
KEY_FILE = "signing.key"
_KEY_BYTES = 32


class RoundTripSigner:
    """Signs and verifies `(session_id, response_id)` values."""

    def __init__(self, key: bytes) -> None:
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)
        """The HMAC with the key set, copied per value (a fresh `hmac.new` sets the key up again; a resend verifies
        one value per thinking block)."""

    @classmethod
    def for_journal(cls, journal: Path | None) -> RoundTripSigner:
        """A random key, or the journal directory's (created there on first start, readable by the owner only)."""
        if journal is None:
            return cls(secrets.token_bytes(_KEY_BYTES))
        path = Path(journal) / KEY_FILE
        if path.exists():
            return cls(path.read_bytes())
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(_KEY_BYTES)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(key)
        return cls(key)

    def sign(self, session_id: str, response_id: str) -> str:
        payload = f"{session_id}\x00{response_id}".encode()
        named = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{PREFIX}.{named}.{self._mac(payload)}"

    def signing(self, session_id: str, response_id: str) -> Callable[[], str]:
        """`sign`, deferred to the first call and kept: only a reply with reasoning carries its value."""
        signed: list[str] = []

        def value() -> str:
            if not signed:
                signed.append(self.sign(session_id, response_id))
            return signed[0]

        return value

    def verify(self, value: object, session_id: str) -> str | None:
        """The response id `value` names when it is tito's, unaltered and of this session; else None."""
        if not isinstance(value, str):
            return None
        prefix, _, rest = value.partition(".")
        named, _, mac = rest.partition(".")
        if prefix != PREFIX or not named or not mac:
            return None
        try:
            payload = base64.urlsafe_b64decode(named + "=" * (-len(named) % 4))
        except ValueError:
            return None
        if not hmac.compare_digest(self._mac(payload), mac):
            return None
        signed_session, _, response_id = payload.decode(errors="replace").partition("\x00")
        return response_id if signed_session == session_id and response_id else None

    def _mac(self, payload: bytes) -> str:
        mac = self._keyed.copy()
        mac.update(payload)
        return mac.hexdigest()[:32]
