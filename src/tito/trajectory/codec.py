"""Sample encodings for the trainer: JSON, and safetensors written from the format (no numpy, no torch).

Safetensors layout (one container per reply): for sample `i`, tensors `tokens.{i}` (I32), `loss_mask.{i}` (U8)
and `rollout_logprobs.{i}` (F32), all of shape `[len(tokens)]`; the header's `__metadata__["tito.samples"]` is
compact JSON: `[{"response_length", "status", "reward", "metadata", "spans", "group_id", "conversation"}, ...]`
in sample order (`sample_facts`).

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
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import orjson

from tito.errors import TitoError
from tito.trajectory.samples import Sample, TurnSpan

SAFETENSORS_MEDIA_TYPE = "application/vnd.safetensors"
_METADATA_KEY = "tito.samples"
_FIELDS = (("tokens", "I32", "i"), ("loss_mask", "U8", "B"), ("rollout_logprobs", "F32", "f"))


def json_bytes(value: Any) -> bytes:
    """`value` as compact JSON: orjson's, or stdlib json's where orjson refuses (an integer beyond 64 bits, which a
    journal written before requests were range-checked may hold), so what is stored can always be read back."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()


class SampleDecodeError(TitoError):
    """A samples payload that does not follow tito's layout (missing tensor, wrong dtype or length)."""

    http_status = 400


def sample_to_json(sample: Sample) -> dict[str, Any]:
    """One sample as JSON-ready lists and values."""
    return {
        "tokens": sample.tokens.tolist(),
        "loss_mask": sample.loss_mask.tolist(),
        "rollout_logprobs": sample.rollout_logprobs.tolist(),
        **sample_facts(sample),
    }


def sample_facts(sample: Sample) -> dict[str, Any]:
    """Everything of a sample but its three per-token arrays, JSON-ready."""
    return {
        "response_length": sample.response_length,
        "status": sample.status,
        "reward": sample.reward,
        "metadata": dict(sample.metadata),
        "spans": [span_to_json(span) for span in sample.spans],
        "group_id": sample.group_id,
        "conversation": None if sample.conversation is None else dict(sample.conversation),
    }


def span_to_json(span: TurnSpan) -> dict[str, Any]:
    encoded = asdict(span)
    encoded["weight_versions"] = list(span.weight_versions)
    encoded["sampling"] = dict(span.sampling)
    encoded["messages"] = [dict(message) for message in span.messages]
    encoded["assistant"] = None if span.assistant is None else dict(span.assistant)
    return encoded


def sample_from_json(encoded: Mapping[str, Any]) -> Sample:
    """The sample `sample_to_json` wrote."""
    return sample_from_facts(
        encoded,
        array("i", encoded["tokens"]),
        array("b", encoded["loss_mask"]),
        array("f", encoded["rollout_logprobs"]),
    )


def sample_from_facts(
    facts: Mapping[str, Any], tokens: array[int], loss_mask: array[int], rollout_logprobs: array[float]
) -> Sample:
    """A sample from `sample_facts` and its three arrays; a missing or mistyped fact is a SampleDecodeError."""
    try:
        return Sample(
            tokens=tokens,
            loss_mask=loss_mask,
            rollout_logprobs=rollout_logprobs,
            response_length=int(facts["response_length"]),
            status=str(facts["status"]),
            reward=None if facts["reward"] is None else float(facts["reward"]),
            metadata=dict(facts["metadata"]),
            spans=tuple(_span_from_json(span) for span in facts.get("spans") or ()),
            group_id=facts.get("group_id"),
            conversation=None if facts.get("conversation") is None else dict(facts["conversation"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SampleDecodeError(f"sample facts are missing or mistyped: {type(exc).__name__}: {exc}") from exc


def _span_from_json(encoded: Mapping[str, Any]) -> TurnSpan:
    messages = tuple(encoded.get("messages") or ())
    return TurnSpan(**{**encoded, "weight_versions": tuple(encoded["weight_versions"]), "messages": messages})


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
    described = [sample_facts(sample) for sample in samples]
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
        samples.append(sample_from_facts(facts, columns[0], array("b", columns[1].tobytes()), columns[2]))
    if header:
        raise SampleDecodeError(f"tensors that belong to no sample: {sorted(header)}")
    return samples
