"""Sample encodings for the trainer: JSON, and safetensors written from the format (no numpy, no torch).

Safetensors layout (one container per reply): for sample `i`, tensors `tokens.{i}` (I32), `loss_mask.{i}` (U8)
and `rollout_logprobs.{i}` (F32), all of shape `[len(tokens)]`; the header's `__metadata__["tito.samples"]` is
compact JSON: `[{"response_length", "status", "reward", "metadata"}, ...]` in sample order.

Loading in a trainer (either works):

    from tito.trajectory.codec import decode_safetensors
    samples = decode_safetensors(response.content)        # list[Sample], arrays as array('i'/'b'/'f')

    import json, safetensors.torch                         # or with the safetensors package
    tensors = safetensors.torch.load(response.content)     # {"tokens.0": tensor, ...}
    with safetensors.safe_open(path, "pt") as f: meta = json.loads(f.metadata()["tito.samples"])

Imports nothing from tito but errors and trajectory.samples.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any

from tito.errors import TitoError
from tito.trajectory.samples import Sample

SAFETENSORS_MEDIA_TYPE = "application/vnd.safetensors"
_METADATA_KEY = "tito.samples"
_FIELDS = (("tokens", "I32", "i"), ("loss_mask", "U8", "B"), ("rollout_logprobs", "F32", "f"))


class SampleDecodeError(TitoError):
    """A samples payload that does not follow tito's layout (missing tensor, wrong dtype or length)."""

    http_status = 400


def sample_to_json(sample: Sample) -> dict[str, Any]:
    """One sample as JSON-ready lists and values."""
    return {
        "tokens": sample.tokens.tolist(),
        "loss_mask": sample.loss_mask.tolist(),
        "rollout_logprobs": sample.rollout_logprobs.tolist(),
        "response_length": sample.response_length,
        "status": sample.status,
        "reward": sample.reward,
        "metadata": dict(sample.metadata),
    }


def _little_endian(values: array[Any]) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return swapped.tobytes()


def encode_safetensors(samples: Sequence[Sample]) -> bytes:
    """The samples as one safetensors container (layout in the module docstring)."""
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for index, sample in enumerate(samples):
        mask = array("B", sample.loss_mask.tobytes())
        columns: tuple[array[Any], ...] = (sample.tokens, mask, sample.rollout_logprobs)
        for (name, dtype, _), values in zip(_FIELDS, columns, strict=True):
            data = _little_endian(values)
            extent = [offset, offset + len(data)]
            header[f"{name}.{index}"] = {"dtype": dtype, "shape": [len(values)], "data_offsets": extent}
            chunks.append(data)
            offset += len(data)
    described = [
        {"response_length": s.response_length, "status": s.status, "reward": s.reward, "metadata": dict(s.metadata)}
        for s in samples
    ]
    header["__metadata__"] = {_METADATA_KEY: json.dumps(described, separators=(",", ":"))}
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks)


def decode_safetensors(payload: bytes) -> list[Sample]:
    """The samples of a container written by `encode_safetensors`; strict about its layout."""
    if len(payload) < 8:
        raise SampleDecodeError(f"a safetensors payload starts with an 8-byte header size; got {len(payload)} bytes")
    (size,) = struct.unpack("<Q", payload[:8])
    try:
        header = json.loads(payload[8 : 8 + size])
        described = json.loads(header.pop("__metadata__")[_METADATA_KEY])
    except (ValueError, KeyError, TypeError) as exc:
        raise SampleDecodeError(f"the header has no readable __metadata__[{_METADATA_KEY!r}]: {exc}") from exc
    data = memoryview(payload)[8 + size :]
    samples = []
    for index, facts in enumerate(described):
        columns: list[array[Any]] = []
        for name, dtype, typecode in _FIELDS:
            key = f"{name}.{index}"
            entry = header.pop(key, None)
            if entry is None or entry.get("dtype") != dtype:
                raise SampleDecodeError(f"tensor {key!r} is missing or not {dtype}: {entry}")
            begin, end = entry["data_offsets"]
            values = array(typecode, data[begin:end].tobytes())
            if sys.byteorder != "little":
                values.byteswap()
            columns.append(values)
        if not len(columns[0]) == len(columns[1]) == len(columns[2]):
            raise SampleDecodeError(f"sample {index}: tokens, loss_mask and rollout_logprobs differ in length")
        samples.append(
            Sample(
                tokens=columns[0],
                loss_mask=array("b", columns[1].tobytes()),
                rollout_logprobs=columns[2],
                response_length=int(facts["response_length"]),
                status=str(facts["status"]),
                reward=facts["reward"],
                metadata=facts["metadata"],
            )
        )
    if header:
        raise SampleDecodeError(f"tensors that belong to no sample: {sorted(header)}")
    return samples
