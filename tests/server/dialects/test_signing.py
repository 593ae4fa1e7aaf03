"""Round-trip values: what tito signs verifies for its session only, anything altered or foreign names nothing,
and a journaled server keeps its key across restarts."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

from tito.server.dialects.signing import KEY_FILE, RoundTripSigner


def test_a_signed_value_names_its_response_in_its_own_session_only() -> None:
    signer = RoundTripSigner(b"k" * 32)
    value = signer.sign("session-a", "msg_123")
    assert signer.verify(value, "session-a") == "msg_123"
    assert signer.verify(value, "session-b") is None


def test_a_value_is_the_hmac_sha256_of_its_names_so_values_of_a_kept_key_verify_across_versions() -> None:
    signer = RoundTripSigner(b"k" * 32)
    for session_id, response_id in (("s", "msg_1"), ("s", "msg_2"), ("another", "resp_ü")):
        prefix, named, mac = signer.sign(session_id, response_id).split(".")
        payload = f"{session_id}\x00{response_id}".encode()
        assert (prefix, base64.urlsafe_b64decode(named + "=" * (-len(named) % 4))) == ("tito1", payload)
        assert mac == hmac.new(b"k" * 32, payload, hashlib.sha256).hexdigest()[:32]


def test_a_replys_value_is_signed_when_first_asked_and_once() -> None:
    signer, asked = RoundTripSigner(b"k" * 32), []

    class Counting(RoundTripSigner):
        def sign(self, session_id: str, response_id: str) -> str:
            asked.append((session_id, response_id))
            return super().sign(session_id, response_id)

    value = Counting(b"k" * 32).signing("s", "msg_1")
    assert asked == []  # a reply without reasoning never signs
    assert value() == value() == signer.sign("s", "msg_1")
    assert asked == [("s", "msg_1")]


def test_an_altered_forged_or_foreign_value_names_nothing() -> None:
    signer = RoundTripSigner(b"k" * 32)
    value = signer.sign("s", "resp_1")
    prefix, named, mac = value.split(".")
    other_named = RoundTripSigner(b"k" * 32).sign("s", "resp_2").split(".")[1]
    for untrusted in (
        f"{prefix}.{named}.{'0' * len(mac)}",  # a made-up MAC
        f"{prefix}.{other_named}.{mac}",  # another response under this MAC
        RoundTripSigner(b"x" * 32).sign("s", "resp_1"),  # another server's key
        "EqVkZXJz...anthropic's own signature",
        "",
        None,
        42,
        "tito1.!!!.abc",
    ):
        assert signer.verify(untrusted, "s") is None, untrusted


def test_a_journaled_server_keeps_its_key_and_others_get_a_fresh_one(tmp_path: Path) -> None:
    first = RoundTripSigner.for_journal(tmp_path)
    value = first.sign("s", "msg_1")
    assert (tmp_path / KEY_FILE).stat().st_mode & 0o077 == 0  # readable by the owner only
    assert RoundTripSigner.for_journal(tmp_path).verify(value, "s") == "msg_1"
    assert RoundTripSigner.for_journal(None).verify(value, "s") is None
