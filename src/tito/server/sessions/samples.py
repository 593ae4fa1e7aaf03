"""The samples route's work: a session's path sequences become samples, in the format the trainer asked for.

One code path for linear and tree sessions, shared with `tito journal export`: `trajectory.samples.requested_samples`
of the body's JSON (the journal keeps it), with the agent's reward(s), group, metadata (never over server-owned
keys) and the trainer's budgets. The format comes from the body's
`format`, else the `?format=` query, else the Accept header (`application/vnd.safetensors`, or
`application/vnd.tito.<format>+json` for a trainer's format); `json` by default.

Imports nothing from tito but trajectory and server.models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.responses import Response

from tito.server.models import SamplesRequest
from tito.trajectory.base import Trajectory
from tito.trajectory.codec import SAFETENSORS_MEDIA_TYPE, encode_safetensors, json_bytes, sample_to_json
from tito.trajectory.exports import PROJECTIONS, projection
from tito.trajectory.samples import Sample, posted_reward, requested_samples

TITO_FORMATS = ("json", "safetensors")
"""tito's own encodings; every other format is a trainer's projection (`trajectory.exports`)."""
_ACCEPT_PREFIX = "application/vnd.tito."
_ACCEPT_SUFFIX = "+json"


def samples_format(asked: str | None, query: str | None, accept: str) -> str:
    """The format a samples request wants; UnknownFormatError (400) names the choices when it is none of them."""
    chosen = asked or query
    if chosen is None:
        if SAFETENSORS_MEDIA_TYPE in accept:
            return "safetensors"
        for media_type in accept.split(","):
            media_type = media_type.split(";")[0].strip()
            if media_type.startswith(_ACCEPT_PREFIX) and media_type.endswith(_ACCEPT_SUFFIX):
                chosen = media_type[len(_ACCEPT_PREFIX) : -len(_ACCEPT_SUFFIX)]
                break
    if chosen is None or chosen in TITO_FORMATS:
        return chosen or "json"
    return projection(chosen, TITO_FORMATS).name


def build_samples(
    session_id: str,
    trajectory: Trajectory,
    asked: SamplesRequest,
    server_metadata: Mapping[str, Any],
    session_group_id: str | None = None,
) -> list[Sample]:
    """The session's samples; `server_metadata` (e.g. the engine's name) wins over the agent's keys of that name.

    Raises UnknownResponseIdError (400) when `rewards` names a response id of no turn, SampleAssemblyError (422)
    when the session has no committed turn, and SampleHookError (422) when a picker or post-processor breaks its
    contract."""
    return requested_samples(session_id, trajectory, asked_json(asked), server_metadata, session_group_id)


def asked_json(asked: SamplesRequest) -> dict[str, Any]:
    """The body's fields that were given, as JSON: what the journal keeps with `SamplesTaken`."""
    return asked.model_dump(mode="json", exclude_none=True)


def session_reward(asked: SamplesRequest, samples: Sequence[Sample]) -> float | None:
    """What the session shows as its reward after a samples request: the first sample's, or the posted scalar when
    the post-processor kept no sample (an empty list is within its contract)."""
    return samples[0].reward if samples else posted_reward(asked_json(asked))


def samples_response(session_id: str, samples: Sequence[Sample], format: str) -> Response:
    """The reply body: a safetensors container, tito's JSON, or `{"format", "upstream", "samples"}` for a trainer."""
    if format == "safetensors":
        return Response(encode_safetensors(samples), media_type=SAFETENSORS_MEDIA_TYPE)
    if format == "json":
        body: dict[str, Any] = {"session_id": session_id, "samples": [sample_to_json(sample) for sample in samples]}
    else:
        chosen = PROJECTIONS[format]
        body = {"session_id": session_id, "format": format, "upstream": chosen.upstream,
                "samples": chosen.export(samples)}  # fmt: skip
    return Response(json_bytes(body), media_type="application/json")
