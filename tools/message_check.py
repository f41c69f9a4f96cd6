"""A mypy plugin: a message formatted into a string is an error (``make typecheck``).

A :class:`model_store.text.Message` is said in the reader's language when it is shown; turned
into a string on the way it is English for good. mypy already refuses a message where a ``str``
is expected. This plugin adds the ways Python formats a value into a string without asking for
a ``str``: f-strings and ``.format()`` (mypy reads both as ``str.format``), ``%``, ``+`` and
``str.join``. The tests' runtime guard (model_store/text.py) catches the first three where the
type is not known; ``%`` it cannot see, so this check is the one that catches it.

Ask for the English on purpose with ``{value!s}`` (a log line) or ``str(value)``.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator

from mypy.nodes import CallExpr, DictExpr, Expression, MemberExpr, StrExpr, TupleExpr
from mypy.plugin import MethodContext, Plugin
from mypy.types import Instance, Type, UnionType, get_proper_type

MESSAGE = "model_store.text.Message"
HINT = "say it in a template that names it, or ask for the English with {x!s} or str(x)"


def _holds_message(typ: Type) -> bool:
    proper = get_proper_type(typ)
    if isinstance(proper, Instance):
        return proper.type.fullname == MESSAGE
    if isinstance(proper, UnionType):
        return any(_holds_message(item) for item in proper.items)
    return False


def _conversions(ctx: MethodContext) -> list[str | None] | None:
    """The ``!s``/``!r`` of each replacement field of a literal format string, in order."""
    call = ctx.context
    if not (
        isinstance(call, CallExpr)
        and isinstance(call.callee, MemberExpr)
        and isinstance(call.callee.expr, StrExpr)
    ):
        return None
    found: list[str | None] = []
    try:
        for _, field, spec, conversion in string.Formatter().parse(call.callee.expr.value):
            if field is not None:
                found.append(conversion)
            for _, inner, _, inner_conversion in string.Formatter().parse(spec or ""):
                if inner is not None:
                    found.append(inner_conversion)
    except ValueError:
        return None
    return found


def _arguments(ctx: MethodContext) -> Iterator[Type]:
    for group in ctx.arg_types:
        yield from group


def _format(ctx: MethodContext) -> Type:
    conversions = _conversions(ctx)
    for index, typ in enumerate(_arguments(ctx)):
        asked = conversions[index] if conversions and index < len(conversions) else None
        if _holds_message(typ) and asked not in ("s", "r"):
            ctx.api.fail(f"A message is formatted into a string; {HINT}", ctx.context)
    return ctx.default_return_type


def _percent(ctx: MethodContext) -> Type:
    for group in ctx.args:
        for expr in group:
            # A literal dict or tuple on the right: look at each value as written (its type in
            # the context of ``str.__mod__(Any)`` would be Any).
            if isinstance(expr, DictExpr):
                parts: list[Expression] = [value for _, value in expr.items]
            elif isinstance(expr, TupleExpr):
                parts = list(expr.items)
            else:
                parts = [expr]
            if any(_holds_message(ctx.api.get_expression_type(part)) for part in parts):
                ctx.api.fail(f"A message is put into a string with %; {HINT}", ctx.context)
    return ctx.default_return_type


def _plus(ctx: MethodContext) -> Type:
    if any(_holds_message(typ) for typ in _arguments(ctx)):
        ctx.api.fail(f"A message is added to a string; {HINT}", ctx.context)
    return ctx.default_return_type


def _join(ctx: MethodContext) -> Type:
    for typ in _arguments(ctx):
        proper = get_proper_type(typ)
        if isinstance(proper, Instance) and any(_holds_message(a) for a in proper.args):
            ctx.api.fail("Messages are joined as strings; use model_store.text.joined", ctx.context)
    return ctx.default_return_type


def _message_operator(ctx: MethodContext) -> Type:
    ctx.api.fail(f"A message is formatted or added to a string; {HINT}", ctx.context)
    return ctx.default_return_type


HOOKS: dict[str, Callable[[MethodContext], Type]] = {
    "builtins.str.format": _format,
    "builtins.str.__mod__": _percent,
    "builtins.str.__add__": _plus,
    "builtins.str.join": _join,
    f"{MESSAGE}.__format__": _message_operator,
    f"{MESSAGE}.__add__": _message_operator,
    f"{MESSAGE}.__radd__": _message_operator,
}


class MessageCheck(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return HOOKS.get(fullname)


def plugin(version: str) -> type[Plugin]:
    return MessageCheck
