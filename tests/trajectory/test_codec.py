"""Sample codec: safetensors written from the format round-trips, and reads with the safetensors package too."""

from __future__ import annotations

import json
from array import array

import pytest

from tito.trajectory.codec import SampleDecodeError, decode_safetensors, encode_safetensors, sample_to_json
from tito.trajectory.samples import Sample


def sample(length: int, reward: float | None) -> Sample:
    return Sample(
        tokens=array("i", range(100_000, 100_000 + length)),
        loss_mask=array("b", [i % 2 for i in range(length)]),
        rollout_logprobs=array("f", [-(i % 2) * 0.5 for i in range(length)]),
        response_length=length - 1,
        status="completed",
        reward=reward,
        metadata={"turns": [{"finish_reason": "stop"}]},
    )


def test_safetensors_round_trip_keeps_every_field() -> None:
    samples = [sample(5, 1.0), sample(3, None)]
    assert decode_safetensors(encode_safetensors(samples)) == samples


def test_the_safetensors_package_reads_tito_containers() -> None:
    safetensors = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    payload = encode_safetensors([sample(4, 0.5)])
    tensors = safetensors.load(payload)
    assert tensors["tokens.0"].dtype.name == "int32" and tensors["tokens.0"].tolist() == list(range(100_000, 100_004))
    assert tensors["loss_mask.0"].tolist() == [0, 1, 0, 1]
    assert tensors["rollout_logprobs.0"].tolist() == [0.0, -0.5, 0.0, -0.5]


def test_json_is_plain_lists_and_values() -> None:
    encoded = json.loads(json.dumps(sample_to_json(sample(2, None))))
    assert encoded["tokens"] == [100_000, 100_001] and encoded["loss_mask"] == [0, 1] and encoded["reward"] is None


def test_a_container_missing_a_tensor_is_refused_by_name() -> None:
    payload = bytearray(encode_safetensors([sample(2, None)]))
    header_size = int.from_bytes(payload[:8], "little")
    header = payload[8 : 8 + header_size].replace(b'"loss_mask.0"', b'"loss_mask.9"')
    with pytest.raises(SampleDecodeError, match=r"loss_mask\.0"):
        decode_safetensors(bytes(payload[:8] + header + payload[8 + header_size :]))
