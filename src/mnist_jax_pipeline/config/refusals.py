"""The one line a refused params.yaml value becomes: the dotted key at fault and what is allowed there."""

import json
import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from ..foundation.errors import clip


def describe(error: ErrorDetails, model: type[BaseModel]) -> str:
    """One line: the dotted key at fault and what is allowed there."""
    loc, kind, ctx, value = error["loc"], error["type"], error.get("ctx", {}), error.get("input")
    key, shown = clip(".".join(map(str, loc))), clip(json.dumps(value, default=str))
    if kind == "extra_forbidden":
        section: Any = model
        for part in loc[:-1]:
            section = section.model_fields[str(part)].annotation
        return f"unknown key '{key}'; allowed keys here: {', '.join(sorted(section.model_fields))}"
    if kind == "value_error":  # the rules above name their keys themselves
        return error["msg"].removeprefix("Value error, ")
    whole = "; write a whole number"
    if isinstance(value, float) and value.is_integer():  # not inf or nan
        whole = "; write it without a decimal point"
    elif isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        whole = "; write it without quotes"
    allowed = ", ".join(json.dumps(a) for a in re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
    messages = {
        "missing": "missing; add it (docs/parameters.md lists every key)",
        "invalid_key": "a key that is not text; write a name (docs/parameters.md lists every key)",
        "int_type": f"{shown} is not an integer{whole}",
        "float_type": f"{shown} is not a number; write one such as 0.01",
        "bool_type": f"{shown} is not a boolean; write true or false",
        "finite_number": f"{shown} is not a finite number; write one such as 0.01",
        "literal_error": f"{shown} is not allowed; use one of {allowed}",
        "greater_than_equal": f"{shown} is less than the minimum of {ctx.get('ge')}; raise it",
        "greater_than": f"{shown} must be greater than {ctx.get('gt')}; raise it",
        "less_than_equal": f"{shown} is more than the maximum of {ctx.get('le')}; lower it",
        "less_than": f"{shown} must be less than {ctx.get('lt')}; lower it",
        "too_short": f"needs at least {ctx.get('min_length')} item(s); add more",
        "too_long": f"allows at most {ctx.get('max_length')} items; remove some",
        "tuple_type": f"{shown} is not a list; write [a, b, ...]",
        "model_type": f"{shown} is not a mapping; write one `key: value` per line",
        "model_attributes_type": f"{shown} is not a mapping; write one `key: value` per line",
    }
    return f"{key or '(top level)'}: {messages.get(kind, error['msg'])}"
