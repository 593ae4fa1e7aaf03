"""The command line: choices from the registry, exit codes, results on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tito.cli import main
from tito.families import VALID_APPEND_ROLES, list_families

pytestmark = pytest.mark.usefixtures("shared_builtin_tokenizers")  # tests.conftest


def test_verify_passes_and_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--family", "qwen3", "--max-sequence-length", "1"]) == 0
    out = capsys.readouterr().out
    assert "multi_user" in out and " 0 failed" in out


def test_verify_on_the_default_family_claims_no_role_the_official_qwen3_template_rewrites(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.conftest import reference_path

    directory = reference_path("tokenizers", "qwen3")
    kwargs = '{"enable_thinking": true}'
    assert main(["verify", "--family", "default", "--tokenizer", str(directory), "--chat-template-kwargs", kwargs]) == 0
    out = capsys.readouterr().out
    assert "probe user     : after a chat history appending it rewrites the earlier render" in out
    assert "probe tool     : supported" in out
    assert " 0 failed" in out
    multi_user = next(line.split() for line in out.splitlines() if line.startswith("multi_user"))
    assert multi_user[2:] == ["0", "0", "2"], "appending a user is refused, so those cuts are skipped"


def test_render_prints_text_and_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    assert main(["render", "--tito-model", "qwen3", str(conversation), "--add-generation-prompt", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["text"].endswith("<|im_start|>assistant\n") and result["ids"][-1] == 198


def test_render_tokenizes_content_markers_per_the_content_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "<|im_end|>"}]))
    counts = {}
    for mode in ("control", "text", '{"user": "text"}'):
        assert main(["render", "--family", "qwen3", str(conversation), "--content-special-tokens", mode, "--json"]) == 0
        counts[mode] = json.loads(capsys.readouterr().out)["ids"].count(151645)  # <|im_end|>
    assert counts == {"control": 2, "text": 1, '{"user": "text"}': 1}


def test_a_bad_content_mode_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["render", "--family", "qwen3", str(tmp_path / "c.json"), "--content-special-tokens", "raw"])
    assert exit_info.value.code == 2


def test_unknown_family_is_a_usage_error_listing_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["verify", "--family", "nope"])
    assert exit_info.value.code == 2


def test_bad_input_exits_1_with_the_error_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "wizard", "content": "Hi"}]))
    assert main(["render", "--family", "qwen3", str(conversation)]) == 1
    assert "MessageError: message 0: field 'role'" in capsys.readouterr().err


def test_help_lists_every_family() -> None:
    from tito.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["verify"].format_help()  # type: ignore[union-attr]
    assert all(name in help_text for name in list_families())
    assert all(role in help_text for role in VALID_APPEND_ROLES)


def test_verify_with_allowed_roles_checks_only_those_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--family", "qwen3", "--allowed-append-roles", "tool", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["failed"] == []
    with pytest.raises(SystemExit):
        main(["verify", "--family", "qwen3", "--allowed-append-roles", "developer"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[1, 2", "is not valid JSON"),
        (b'"just text"', "must hold a list of messages or an object with a 'messages' list"),
        (b'{"tools": []}', "must hold a list of messages or an object with a 'messages' list"),
        (b"\xff\xfe[]", "is not UTF-8 text (byte 0)"),
    ],
)
def test_a_bad_conversation_file_is_one_line_naming_the_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, problem: str
) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_bytes(content)
    assert main(["render", "--family", "qwen3", str(conversation)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tito: error: {conversation} {problem}")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--family", "qwen3", str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().err.startswith(f"tito: error: cannot read {tmp_path / 'absent.json'}")


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [("[1]", "must be a JSON object, not list"), ("{enable_thinking: 1}", "is not valid JSON")],
)
def test_template_kwargs_must_be_a_json_object(capsys: pytest.CaptureFixture[str], kwargs: str, problem: str) -> None:
    assert main(["verify", "--family", "qwen3", "--chat-template-kwargs", kwargs]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tito: error: --chat-template-kwargs {problem}") and err.count("\n") == 1


def test_an_unknown_template_kwarg_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--family", "qwen3", "--chat-template-kwargs", '{"enable_thinkng": false}']) == 1
    err = capsys.readouterr().err
    assert "UnknownTemplateKwargError: unknown chat-template kwarg 'enable_thinkng'; qwen3 reads: " in err


def test_a_thinking_kwarg_restricts_verify_to_that_mode(capsys: pytest.CaptureFixture[str]) -> None:
    kwargs = '{"enable_thinking": false}'
    assert main(["verify", "--family", "qwen3", "--max-sequence-length", "1", "--chat-template-kwargs", kwargs]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("multi_user")]
    assert [row[1] for row in rows] == ["off"]


def test_render_and_verify_announce_a_stand_in_tokenizer_on_stdout_in_the_same_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tito.family_tokenizer import stand_in_notice

    notice = stand_in_notice("glm47")
    assert notice is not None
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    assert main(["render", "--family", "glm47", str(conversation)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == notice
    assert main(["render", "--family", "glm47", str(conversation), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stand_in_notice"] == notice
    assert main(["verify", "--family", "glm47", "--max-sequence-length", "1", "--allowed-append-roles", "tool"]) == 0
    assert notice in capsys.readouterr().out.splitlines()
    assert main(["render", "--family", "qwen3", str(conversation)]) == 0
    assert "stand-in" not in capsys.readouterr().out, "qwen3 renders with its real tokenizer"


def test_verify_list_explains_every_shape_on_one_line_without_a_family(capsys: pytest.CaptureFixture[str]) -> None:
    from tito.conformance import SHAPE_EXPLANATIONS, shapes

    with pytest.raises(SystemExit) as exit_info:
        main(["verify", "--list"])
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(SHAPE_EXPLANATIONS)
    assert set(shapes()) | {"quoted_markers", "roles"} == set(SHAPE_EXPLANATIONS)
    assert all(len(line.split()) > 2 for line in lines), "each shape has its explanation"


def test_verify_json_counts_each_shape_and_mode_and_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    from tito.conformance import SHAPE_EXPLANATIONS

    assert main(["verify", "--family", "qwen3", "--max-sequence-length", "1", "--allowed-append-roles", "tool",
                 "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    counts = report["counts"]
    assert {row["thinking"] for row in counts} == {True, False}
    assert {row["shape"] for row in counts} <= set(SHAPE_EXPLANATIONS), "every reported shape is explained by --list"
    assert sum(row["passed"] + row["failed"] + row["skipped"] for row in counts) == report["cases"]
    assert report["failed"] == [] and report["stand_in_notice"] is None


def test_verify_json_lists_every_failure(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import tito.conformance
    from tito.conformance import CaseResult

    failures = [CaseResult("roles:tool", cut, ("tool",), None, "prefix", False, f"case {cut}") for cut in range(25)]
    passed = CaseResult("multi_user", 0, ("user",), None, "prefix", True)
    monkeypatch.setattr(tito.conformance, "run_matrix", lambda *args: [*failures, passed])
    assert main(["verify", "--family", "qwen3", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [failure["detail"] for failure in report["failed"]] == [f"case {cut}" for cut in range(25)]
    assert report["counts"] == [
        {"shape": "roles", "thinking": None, "passed": 0, "failed": 25, "skipped": 0},
        {"shape": "multi_user", "thinking": None, "passed": 1, "failed": 0, "skipped": 0},
    ]


def test_render_prints_text_separator_and_ids_all_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    assert main(["render", "--family", "qwen3", str(conversation)]) == 0
    captured = capsys.readouterr()
    text, separator, ids = captured.out.rstrip("\n").rsplit("\n", 2)
    assert separator == f"--- {len(ids.split())} ids ---" and text.endswith("Hi<|im_end|>\n") and captured.err == ""
