"""tito's Jinja environment renders the official templates byte for byte as transformers does."""

from __future__ import annotations

from types import SimpleNamespace

import jinja2
import pytest

from tests.conftest import reference_path
from tito.conformance import TOOLS, shapes
from tito.errors import TemplateRenderError
from tito.families import fixed_families, get_family
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


@pytest.mark.parametrize("family", [name for name in fixed_families() if get_family(name).fixed_template.template])
def test_a_fixed_template_renders_the_same_outside_the_sandbox_as_in_it(family: str) -> None:
    """tito's own templates render outside the sandbox (rendering.compile_template's `trusted`): not one byte may
    change, on every conformance conversation, with and without tools and the generation prompt."""
    source = get_family(family).fixed_template.source()
    trusted, sandboxed = compile_template(source, trusted=True), compile_template(source)
    assert type(trusted.environment) is not type(sandboxed.environment)
    for messages in corpus():
        for tools in (None, TOOLS):
            for generation in (False, True):
                assert _outcome(trusted, messages, tools, generation) == _outcome(
                    sandboxed, messages, tools, generation
                )


def _outcome(template: jinja2.Template, messages: list[dict], tools: list | None, generation: bool) -> str:
    """The render, or the refusal's words (a template may refuse a conversation; both must refuse alike)."""
    try:
        return render_template(template, messages, tools, generation)
    except TemplateRenderError as exc:
        return f"refused: {exc}"


def test_a_trusted_render_reads_a_dict_as_jinja_does() -> None:
    """The trusted environment reads `message.name` as the item first (no AttributeError raised per lookup), but
    a dict's own attributes, a missing key and objects that are not plain dicts read as they do in Jinja."""
    source = (
        "{% for m in messages %}{{ m.role }}|{{ m.missing is defined }}|{{ m.items is defined }}|{{ m.keys() | list }}"
        "|{{ m.content if m.content is string else m.content | length }};{% endfor %}"
    )
    messages = [{"role": "user", "content": "hi", "items": "shadowed"}, {"role": "tool", "content": ["a", "b"]}]
    trusted, sandboxed = compile_template(source, trusted=True), compile_template(source)
    rendered = render_template(trusted, messages)
    assert rendered == render_template(sandboxed, messages)
    assert rendered.startswith("user|False|True|['role', 'content', 'items']|hi;")


class _Subclass(dict):  # type: ignore[type-arg]
    """A dict that is not a plain dict: read through the environment's getattr, not in line."""


def test_a_trusted_render_reads_nested_and_non_dict_attributes_as_jinja_does() -> None:
    """The trusted code reads `a.b.c` in line where each step is a plain dict holding the key; a missing key, a dict
    subclass, an object's attribute and a string's method read through the environment, as Jinja reads them."""
    source = (
        "{% for m in messages %}{{ m.call.function.name }}|{{ m.call.function.missing is defined }}"
        "|{{ m.call.missing is defined }}|{{ m.role.upper() }};{% endfor %}"
    )
    messages = [
        {"role": "user", "call": {"function": {"name": "run"}}},
        _Subclass(role="tool", call=_Subclass(function=_Subclass(name="sub", missing=1))),
        SimpleNamespace(role="object", call=SimpleNamespace(function={"name": "attr"})),
        {"role": "x", "call": {"function": "text"}},
    ]
    trusted, sandboxed = compile_template(source, trusted=True), compile_template(source)
    rendered = render_template(trusted, messages)  # type: ignore[arg-type]
    assert rendered == render_template(sandboxed, messages)  # type: ignore[arg-type]
    assert rendered == "run|False|False|USER;sub|True|False|TOOL;attr|False|False|OBJECT;|False|False|X;"
