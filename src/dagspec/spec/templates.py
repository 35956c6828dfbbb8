"""Jinja in stage params: rendered in a sandbox, so a template can read values but not run code.

A value that is exactly one ``{{ expression }}`` keeps the expression's type: a list param renders
as a list, an integer as an integer, ``None`` as ``None``. Any other template renders as a string.
The sandbox also bounds what a template may build (ranges, repetitions, powers, padding widths),
so a template cannot exhaust the memory or the time of the process that renders it (the DAG
processor at parse time, a task at run time).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from types import GeneratorType
from typing import Any

from jinja2 import StrictUndefined, TemplateError, Undefined
from jinja2.exceptions import SecurityError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing

MAX_SIZE = 100_000  # items or characters a template may build, and range items per rendered value
_MAX_POWER_BITS = 100_000
_SINGLE_EXPRESSION = re.compile(r"^\{\{(?P<expr>(?:(?!\{\{|\}\}|\{%|\{#).)*)\}\}$", re.DOTALL)
_PRINTF_WIDTHS = re.compile(r"%[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?")
_range_budget: ContextVar[list[int]] = ContextVar("_range_budget")


class TemplateRenderError(ValueError):
    """A template that cannot be rendered; ``str()`` says which one and why, on one line."""


class _Undefined(StrictUndefined):
    """StrictUndefined whose message lists the keys that do exist (and a close match)."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        if self._undefined_hint:
            return self._undefined_hint
        name = str(self._undefined_name)
        if self._undefined_obj is missing:
            return f"{name!r} is undefined"
        if isinstance(self._undefined_obj, Mapping):
            keys = sorted(str(k) for k in self._undefined_obj)
            return f"{name!r} is undefined (known: {', '.join(keys) or 'none'}){_did_you_mean(name, keys)}"
        return f"{type(self._undefined_obj).__name__} value has no attribute {name!r}"


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_size(size: int, what: str) -> None:
    if size > MAX_SIZE:
        raise SecurityError(f"{what} would be {size} long; templates may build at most {MAX_SIZE}")


def _check_printf(fmt: str, args: Any) -> None:
    for match in _PRINTF_WIDTHS.finditer(fmt):
        for number in match.groups():
            if number == "*":
                raise SecurityError("'*' widths are not allowed in templates")
            if number is not None:
                _check_size(int(number), "a formatted field")


def _budgeted_range(*args: int) -> range:
    numbers = range(*args)
    budget = _range_budget.get(None)
    if budget is not None:
        budget[0] -= len(numbers)
        if budget[0] < 0:
            raise SecurityError(f"ranges in one template may hold at most {MAX_SIZE} items in all")
    _check_size(len(numbers), "a range")
    return numbers


def _width_checked(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A filter whose integer arguments (widths, counts) are bounded."""

    def checked(*args: Any, **kwargs: Any) -> Any:
        for value in (*args[1:], *kwargs.values()):
            if isinstance(value, int):
                _check_size(abs(value), f"the {name} filter's argument")
        return original(*args, **kwargs)

    if hasattr(original, "jinja_pass_arg"):  # Jinja passes the environment first to such filters
        checked.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    return checked


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox with bounds on what ``*``, ``**`` and ``%`` may build."""

    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, str | list | tuple) and isinstance(times, int):
                    _check_size(len(sequence) * times, "a repeated string or list")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right > 0 and abs(left).bit_length() * right > _MAX_POWER_BITS:
                raise SecurityError(f"{left} ** {right} is too large for a template")
        elif operator == "%" and isinstance(left, str):
            _check_printf(left, right)
        return super().call_binop(context, operator, left, right)


_JINJA = _Sandbox(undefined=_Undefined, autoescape=False)
_JINJA.globals["range"] = _budgeted_range
for _unbounded in ("lipsum", "cycler"):  # lipsum(n) builds n paragraphs; nothing in a spec needs either
    _JINJA.globals.pop(_unbounded, None)
for _name in ("center", "indent", "batch", "slice", "wordwrap", "truncate"):
    _JINJA.filters[_name] = _width_checked(_name, _JINJA.filters[_name])
_format_filter = _JINJA.filters["format"]


def _format_checked(value: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(value, str):
        _check_printf(value, args)
    return _format_filter(value, *args, **kwargs)


_JINJA.filters["format"] = _format_checked


def is_templated(value: Any) -> bool:
    """True for a string that Jinja will render at run time."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _native(result: Any) -> Any:
    if isinstance(result, Undefined):
        str(result)  # raises the UndefinedError that says what is missing
    if isinstance(result, range | GeneratorType | Iterator):
        items = list(itertools.islice(result, MAX_SIZE + 1))
        _check_size(len(items), "a sequence")
        return items
    return result


@functools.lru_cache(maxsize=4096)
def _expression(source: str) -> Any:
    """A compiled expression (compiled once: a partitioned stage renders the same params per partition)."""
    return _JINJA.compile_expression(source, undefined_to_none=False)


@functools.lru_cache(maxsize=4096)
def _template(source: str) -> Any:
    """A compiled template (compiled once, as expressions are)."""
    return _JINJA.from_string(source)


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every Jinja string inside ``value`` (Jinja's exceptions propagate).

    A string that is exactly one ``{{ expression }}`` becomes the expression's value; any other
    templated string becomes the rendered text.
    """
    if isinstance(value, str):
        if not is_templated(value):
            return value
        token = _range_budget.set([MAX_SIZE])
        try:
            single = _SINGLE_EXPRESSION.match(value)
            if single is not None:
                return _native(_expression(single["expr"])(**context))
            return _template(value).render(context)
        finally:
            _range_budget.reset(token)
    if isinstance(value, Mapping):
        return {k: render(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, context) for v in value]
    return value


def describe_failure(template: str, exc: BaseException, context: Mapping[str, Any]) -> str:
    """One line saying why ``template`` did not render: the same words at validate and at run time."""
    if isinstance(exc, TemplateError):
        message = exc.message or type(exc).__name__
        if isinstance(exc, UndefinedError) and message.endswith("is undefined"):
            names = sorted(context)
            undefined = message.split("'")[1] if message.count("'") >= 2 else ""
            message += f" (known: {', '.join(names)}){_did_you_mean(undefined, names)}"
    elif isinstance(exc, RecursionError):
        message = "too deeply nested or recursive (RecursionError)"
    else:
        message = f"{exc} ({type(exc).__name__})"
    return f"cannot render {template!r}: {message}"


def render_checked(value: Any, context: Mapping[str, Any]) -> Any:
    """``render`` for one value, with any failure turned into a TemplateRenderError (never a traceback)."""
    try:
        return render(value, context)
    except Exception as exc:  # a template may raise anything Python can: all of it is the spec's error
        raise TemplateRenderError(describe_failure(str(value), exc, context)) from None
