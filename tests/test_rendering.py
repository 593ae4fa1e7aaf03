"""tito's Jinja environment renders the official templates byte for byte as transformers does."""

from __future__ import annotations

import pytest

from tests.conftest import reference_path
from tito.conformance import TOOLS, shapes
from tito.rendering import compile_template, render_template

transformers_templates = pytest.importorskip(
    "transformers.utils.chat_template_utils", reason="transformers not installed: nothing to compare against"
)


def template_names() -> list[str]:
    from tests.conftest import REFERENCE

    directory = REFERENCE / "templates"
    return sorted(path.name for path in directory.glob("*.jinja")) or ["(reference data absent)"]


def corpus() -> list[list[dict]]:
    conversations = []
    for turns in shapes().values():
        messages = [dict(turn.message) for turn in turns]
        conversations += [messages, messages[:2], messages[:-1]]
    return conversations


def hf_render(source: str, messages: list[dict], tools: list | None, generation: bool, **kwargs: object) -> str:
    template = transformers_templates._compile_jinja_template(source)
    return template.render(messages=messages, tools=tools, documents=None, add_generation_prompt=generation, **kwargs)


@pytest.mark.parametrize("name", template_names())
def test_official_templates_render_identically_in_tito_and_transformers(name: str) -> None:
    source = reference_path("templates", name).read_text(encoding="utf-8")
    ours = compile_template(source)
    compared = 0
    for messages in corpus():
        for tools in (None, TOOLS):
            for generation in (False, True):
                for kwargs in ({}, {"enable_thinking": False}):
                    try:
                        expected = hf_render(source, messages, tools, generation, **kwargs)
                    except Exception as exc:  # the template refused; tito must refuse too
                        with pytest.raises(Exception, match=str(exc)[:30].replace("(", r"\(")):
                            render_template(ours, messages, tools, generation, **kwargs)
                        continue
                    assert render_template(ours, messages, tools, generation, **kwargs) == expected
                    compared += 1
    assert compared > 50


def test_tojson_keeps_unicode_and_json_spelling() -> None:
    template = compile_template("{{ value | tojson }}")
    assert render_template(template, [], value={"city": "Zürich", "ok": True, "none": None}) == (
        '{"city": "Zürich", "ok": true, "none": null}'
    )


def test_raise_exception_becomes_a_template_render_error() -> None:
    from tito.errors import TemplateRenderError

    with pytest.raises(TemplateRenderError, match="no messages"):
        render_template(compile_template("{{ raise_exception('no messages') }}"), [])


def test_generation_tag_and_loop_controls_render() -> None:
    source = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
    )
    assert render_template(compile_template(source), [{"content": "a"}, {"content": "b"}]) == "a"
