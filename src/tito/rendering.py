"""A Jinja environment that renders chat templates exactly as Hugging Face does (sandboxed, but for tito's own).

transformers, SGLang and vLLM all render through transformers' environment: trim_blocks and
lstrip_blocks on, loop controls, a `{% generation %}` tag, `tojson` as plain `json.dumps`
(no HTML escaping, `ensure_ascii=False`), and the globals `raise_exception` and `strftime_now`.
Matching it byte for byte is what lets a tito `.jinja` file serve unchanged in those engines;
tests/test_rendering.py compares both renderers on the official templates.

Imports nothing from tito but errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tito.errors import TemplateRenderError

"""An OpenAI-style chat message as plain JSON data."""


def _tojson(
    value: object,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` renders its body, as transformers does outside mask mode."""

    tags = {"generation"}  # noqa: RUF012 - jinja's Extension API declares tags as a class attribute

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller: Any) -> str:
        return str(caller())


_DICT_ATTRIBUTES = frozenset(dir(dict))


class _TrustedCodeGenerator(CodeGenerator):
    """Jinja's code generator with `x.name` read in line when `x` is a dict holding the key `name` (a name that is no
    attribute of `dict`): the item, as `_TrustedEnvironment.getattr` returns it, without a Python call per `.role`
    and `.content` of every message a turn renders; anything else still goes through that getattr."""

    @optimizeconst
    def visit_Getattr(self, node: jinja2.nodes.Getattr, frame: Frame) -> None:
        if self.environment.is_async or node.attr in _DICT_ATTRIBUTES:
            super().visit_Getattr(node, frame)
            return
        # A nested `a.b.c` assigns `_tito_obj` inside the condition before the outer assignment: each read is its own.
        self.write(f"(_tito_obj[{node.attr!r}] if type(_tito_obj := ")
        self.visit(node.node, frame)
        self.write(f") is dict and {node.attr!r} in _tito_obj else environment.getattr(_tito_obj, {node.attr!r}))")


class _TrustedEnvironment(jinja2.Environment):
    """Jinja's environment with `message.content` on a dict read as the item straight away.

    Jinja tries the Python attribute first and takes the item when that raises AttributeError: a raised and caught
    exception for every `.role` and `.content` of every message a turn renders (a third of a fixed template's
    render). Only a name that is no attribute of `dict` is read as an item first, so what each lookup returns is
    the same as Jinja's."""

    code_generator_class = _TrustedCodeGenerator

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def _environment(trusted: bool = False) -> jinja2.Environment:
    """transformers' environment (see the module docstring). `trusted`: tito's own fixed templates, rendered
    without the sandbox's checks on every attribute and call (half the render time on a turn); output is the same
    for any template that renders in the sandbox, which a fixed template must (tests/test_rendering.py)."""
    kind = _TrustedEnvironment if trusted else ImmutableSandboxedEnvironment
    env = kind(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


RENDERER_VARIABLES = frozenset({"messages", "tools", "documents", "add_generation_prompt"})
"""What render_template passes itself; never a caller's chat-template kwarg."""
SPECIAL_TOKEN_VARIABLES = frozenset({"bos_token", "eos_token", "pad_token", "unk_token"})
"""What the tokenizer's special-token map supplies, as transformers does."""


@lru_cache(maxsize=64)
def template_kwargs_read(source: str) -> frozenset[str]:
    """The chat-template kwargs a template reads: its undeclared variables (Jinja's syntax tree) less what the
    renderer, the tokenizer's special tokens and the environment's globals supply, and less the template's own
    variables (assigned in one branch, read in another) unless it asks `is defined` of them."""
    environment = _environment()
    tree = environment.parse(source)
    variables = jinja2.meta.find_undeclared_variables(tree)
    assigned = {node.name for node in tree.find_all(jinja2.nodes.Name) if node.ctx != "load"}
    tested = {
        test.node.name
        for test in tree.find_all(jinja2.nodes.Test)
        if test.name == "defined" and isinstance(test.node, jinja2.nodes.Name)
    }
    internal = assigned - tested  # set by the template itself (in some branch) and never checked for a caller's value
    return frozenset(variables - internal - RENDERER_VARIABLES - SPECIAL_TOKEN_VARIABLES - set(environment.globals))


@lru_cache(maxsize=64)
def compile_template(source: str, trusted: bool = False) -> jinja2.Template:
    """Compile once per distinct template text; compilation never happens on a turn's hot path. Only tito's own
    templates are `trusted` (rendered outside the sandbox); a checkpoint's or a user's never is."""
    return _environment(trusted).from_string(source)


Renderer = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None, bool], str]
"""(messages, tools, add_generation_prompt) -> the render."""


def template_renderer(template: jinja2.Template, kwargs: Mapping[str, Any]) -> Renderer:
    """`render_template` with `kwargs` bound: the template's globals and the kwargs are merged once, not on every
    call (`Template.render` copies its globals' ChainMap key by key into each new context: a quarter of a turn's
    render of a few messages). Each render gets its own context over a fresh dict, as `render` gives it (its
    `new_context`, less the copy)."""
    environment, root, name, blocks = template.environment, template.root_render_func, template.name, template.blocks
    template_globals = dict(template.globals)  # a context reads its globals' keys: from a dict, not a ChainMap
    bound = {**template_globals, **kwargs}

    def render(
        messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None, add_generation_prompt: bool
    ) -> str:
        variables = {
            **bound,
            "messages": messages,
            "tools": tools,
            "documents": None,
            "add_generation_prompt": add_generation_prompt,
        }
        try:
            try:
                context = environment.context_class(environment, variables, name, blocks, template_globals)
                return environment.concat(root(context))
            except Exception:
                environment.handle_exception()  # re-raises with the template's lines in the traceback, as render does
        except jinja2.exceptions.TemplateError as exc:
            raise TemplateRenderError(f"the chat template refused the conversation: {exc}") from exc
        except (TypeError, ValueError, LookupError, AttributeError) as exc:  # a template applying a filter to bad data
            raise TemplateRenderError(
                f"the chat template failed on the conversation: {type(exc).__name__}: {exc}"
            ) from exc

    return render


def render_template(
    template: jinja2.Template,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    **kwargs: Any,
) -> str:
    """Render like `transformers.apply_chat_template(tokenize=False)`; template errors become TemplateRenderError."""
    return template_renderer(template, kwargs)(messages, tools, add_generation_prompt)
