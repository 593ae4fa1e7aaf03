"""`tito journal export DIR --format jsonl|safetensors|verl|...`: a journal's samples, for a trainer, no server.

Exported are the sessions that ended: the journal holds their deletion (by the client or the TTL), their TTL has
elapsed, or their samples were taken (a rollout takes samples when its episode is over); `--all` adds live ones.
Compaction drops deleted and expired sessions, so export them before a compaction pass does (a running server
compacts every minute). Each session's samples come from `tito.trajectory.samples.requested_samples`, the code
`/samples` runs, on the trajectory its journaled turns rebuild, with the body of its last `/samples` request (the
journal keeps it: rewards, group, max_seq_len, budgets, metadata) and the engine facts `/samples` adds: an export
equals the server's last `/samples` reply for that session bit for bit (live, restarted or taken over).
jsonl: one sample per line (`sample_to_json`); safetensors: one container of every sample (`encode_safetensors`);
a trainer's format (`trajectory.exports`: verl, skyrl, prime-rl, verifiers, trl, miles, areal, nemo_gym): that
projection of every sample, as one JSON document (the `samples` of the `/samples` reply in that format). Each sample
carries its session's group id.

Imports from tito: errors, journal.replay, trajectory.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import orjson

from tito.errors import JournalError
from tito.journal.replay import SessionLog, replay
from tito.trajectory import create_episode
from tito.trajectory.codec import encode_safetensors, json_bytes, sample_to_json
from tito.trajectory.exports import PROJECTIONS
from tito.trajectory.samples import Sample, requested_samples

ENGINE_FACTS = ("engine", "logprob_semantics")
"""Turn metadata `/samples` also puts on the sample (from the engine that served it)."""


def has_ended(log: SessionLog, now: float) -> bool:
    """Deleted, expired (recorded or by its TTL at `now`) or sampled."""
    return log.status(now) != "live" or log.samples_taken > 0


Report = Callable[[str], None]
"""Where a session the export leaves out, or writes with a value outside what JSON readers take, is told."""


def _ignore(line: str) -> None:
    return None


def export_samples(
    directory: Path, now: float, include_live: bool = False, only: Collection[str] = (), report: Report = _ignore
) -> tuple[list[Sample], str | None]:
    """The samples of every ended session (every session with `include_live`; of those, only the ones named in
    `only` when given), in creation order, and the journal's damage if any (samples come from the records before it).
    A session whose stored turns cannot be made into samples is told to `report` and left out; the others export."""
    if not directory.is_dir():
        raise JournalError(f"no journal directory at {directory}")
    replayed = replay(directory)
    samples: list[Sample] = []
    for log in replayed.sessions.values():
        if not log.turns or not (include_live or has_ended(log, now)) or (only and log.session_id not in only):
            continue
        try:
            samples += _session_samples(log)
        except Exception as exc:  # one session's stored values must not stop the export of every other
            report(f"session {log.session_id}: not exported: {type(exc).__name__}: {exc}")
    damage = replayed.report.damage
    return samples, None if damage is None else str(damage)


def _session_samples(log: SessionLog) -> list[Sample]:
    trajectory = create_episode(log.created.config)
    for turn in log.turns:
        trajectory.apply(turn)
    last = log.turns[-1].metadata
    facts = {key: last[key] for key in ENGINE_FACTS if key in last}
    return requested_samples(log.session_id, trajectory, log.samples_request, facts, log.created.config.group_id)


def encode(samples: list[Sample], format: str, report: Report = _ignore) -> bytes:
    """The samples in `format`; a session holding an integer beyond 64 bits (stored before requests were
    range-checked) is written exactly all the same (stdlib JSON) and told to `report`."""
    for sample in samples:
        try:
            orjson.dumps(sample_to_json(sample))
        except orjson.JSONEncodeError as exc:
            report(
                f"session {sample.metadata.get('session_id')}: exported with a value 64-bit JSON readers refuse: {exc}"
            )
    if format == "safetensors":
        return encode_safetensors(samples)
    if format in PROJECTIONS:
        return json_bytes(PROJECTIONS[format].export(samples)) + b"\n"
    return b"".join(json_bytes(sample_to_json(sample)) + b"\n" for sample in samples)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def run_export(args: argparse.Namespace) -> int:
    left_out: list[str] = []
    samples, damage = export_samples(Path(args.directory), time.time(), args.all, args.session or (), left_out.append)
    for line in left_out:
        _to_stderr(line)
    payload = encode(samples, args.format, _to_stderr)
    if args.out:
        Path(args.out).write_bytes(payload)
    else:
        sys.stdout.buffer.write(payload)
        sys.stdout.flush()
    print(f"exported {len(samples)} sample(s) as {args.format}", file=sys.stderr)
    if damage is not None:
        print(f"damaged: {damage}; exported the sessions as of the records before it", file=sys.stderr)
    return 1 if damage is not None or left_out else 0


def add_export_command(actions: Any) -> None:
    """Register `tito journal export` under `tito journal`."""
    export = actions.add_parser(
        "export", help="write the samples of sessions that ended (deleted, expired or sampled) for a trainer",
        epilog="example: tito journal export /var/lib/tito/journal --format safetensors --out samples.safetensors",
    )  # fmt: skip
    export.add_argument("directory", metavar="DIR", help="the journal directory")
    export.add_argument("--format", choices=("jsonl", "safetensors", *PROJECTIONS), default="jsonl",
                        help="jsonl: one sample per line; safetensors: one container; a trainer's name: its "
                             "projection as one JSON document [Default: jsonl]")  # fmt: skip
    export.add_argument("--out", metavar="PATH", help="write here [Default: stdout]")
    export.add_argument("--all", action="store_true", help="also export live sessions (as far as they got)")
    export.add_argument("--session", action="append", metavar="ID",
                        help="export only this session (repeatable) [Default: every ended session]")  # fmt: skip
    export.add_argument("--debug", action="store_true", help="show tracebacks")
    export.set_defaults(run=run_export)
