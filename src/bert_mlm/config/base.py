"""What every parameter section is: a frozen pydantic model that is strict (a quoted ``"0.8"`` or a
``true`` never passes for a number), closed (an unknown key is refused, with a did-you-mean), and
whose errors read as the project's one line, ``section.field: value must be ...``. What a field
allows is phrased from its declaration (type, range, choices), for the messages and ``bert-mlm
params`` alike; ``json_schema_extra={"requirement": ...}`` words it where that phrase would not.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from bert_mlm.errors import UserError, did_you_mean

# A mask probability: at 0 nothing is predicted, at 1 nothing is left to predict from.
Probability = Annotated[float, Field(gt=0, lt=1)]
# The name a section being built goes by in messages, where it is not its own key (a variant's overrides).
_NAME: ContextVar[str | None] = ContextVar("section_name", default=None)


class Section(BaseModel):
    """One top-level key of the parameters (``masking:``, ``training:``, ...)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", allow_inf_nan=False)

    SECTION: ClassVar[str] = ""  # the parameters' key, named in every message
    # What an unknown key is told, instead of the list of known ones (None: a did-you-mean).
    UNKNOWN_KEY: ClassVar[str | None] = None

    def __init__(self, *args: Any, **values: Any) -> None:
        """Built from values (library callers: ``TrainingConfig(max_steps=3)``; positional ones in
        the fields' order, as a dataclass takes them) with the project's one-line error."""
        if args:
            fields = list(type(self).model_fields)
            if len(args) > len(fields):
                raise TypeError(f"{type(self).__name__} takes at most {len(fields)} positional values")
            values = {**dict(zip(fields, args, strict=False)), **values}
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise UserError(one_line(type(self), error, values, _NAME.get() or self.SECTION)) from error

    @classmethod
    def build(cls, values: Any, name: str | None = None):
        """The section from its parameters (``None``: every default; an instance: as it is);
        anything invalid is one :class:`UserError` naming ``name.field`` (``name``: the section's
        key by default)."""
        name = name or cls.SECTION
        if isinstance(values, cls):
            return values
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise UserError(f"{name}: {values!r} must be a mapping of {cls.SECTION} values")
        token = _NAME.set(name)
        try:
            return cls(**{str(key): value for key, value in values.items()})
        finally:
            _NAME.reset(token)

    def updated(self, values: Mapping[str, Any]):
        """This section with ``values`` in place, validated as a whole (a tuning trial's, or a
        mask-rate variant's, values)."""
        return self.build({**self.model_dump(), **values})

    def replace(self, **values: Any):
        """This section with ``values`` in place, unvalidated: for values the code derives from
        valid ones (a trial's step budget, a schedule's rate at one step)."""
        return self.model_copy(update=values)


def one_line(cls: type[Section], error: ValidationError, values: Mapping, name: str) -> str:
    """pydantic's first error as the project's message: unknown keys first (a typo explains the
    rest), then a rule's own message, then ``name.field: value must be <what the field allows>``."""
    errors = error.errors()
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        if cls.UNKNOWN_KEY:
            return f"{name}.{unknown[0]}: {cls.UNKNOWN_KEY}"
        hint = did_you_mean(unknown[0], cls.model_fields).rstrip() or f"allowed: {', '.join(cls.model_fields)}"
        return f"{name}: unknown parameter(s) {', '.join(f'{name}.{key}' for key in unknown)}; {hint}"
    first = errors[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, UserError):  # a rule across fields words its own message
        return str(cause)
    field = str(first["loc"][0]) if first["loc"] else ""
    if field not in cls.model_fields:
        return f"{name}: {first['msg']}"
    value = values.get(field)
    return f"{name}.{field}: {value!r} {complaint(cls.model_fields[field], value, first['type'])}"


RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def complaint(field: FieldInfo, value: Any, error_type: str) -> str:
    members = [member for member in alternatives(field) if member[0] is not type(None)]
    kinds = {kind for kind, _ in members}
    if isinstance(value, bool) and bool not in kinds and kinds & {int, float}:
        return "must be a number, not true/false"  # YAML's true is 1 to Python: batch_size: true
    if len(members) == 1 and members[0][0] is Literal and isinstance(value, str):
        return f"is not one of {members[0][1]}"
    if error_type in RANGE_ERRORS and len(members) == 1 and members[0][0] in (int, float) and not worded(field):
        return f"must be {phrase(*members[0], bare=True)}"
    return f"must be {requirement(field)}"


def worded(field: FieldInfo) -> str | None:
    """The field's own words for what it allows (``json_schema_extra={"requirement": ...}``)."""
    return field.json_schema_extra.get("requirement") if isinstance(field.json_schema_extra, dict) else None


def requirement(field: FieldInfo) -> str:
    """What ``field`` allows, in words: ``a positive integer``, ``a number in [0, 1)``,
    ``one of ('linear', 'cosine')``, ``a number > 0 or 'auto'``, ... (``or null`` when optional)."""
    if worded(field):
        return worded(field)
    phrases = [words for kind, detail in alternatives(field)
               for words in (("true", "false") if kind is bool else (phrase(kind, detail),))]
    return phrases[0] if len(phrases) == 1 else f"{', '.join(phrases[:-1])} or {phrases[-1]}"


def alternatives(field: FieldInfo) -> list[tuple[Any, Any]]:
    """The field's type as ``(kind, detail)`` pairs, one per alternative of a union: ``(int,
    bounds)``, ``(float, bounds)``, ``(Literal, choices)``, ``(bool, None)``, ``(str, min_length)``,
    ``(dict, None)``, ``(list, None)``, ``(NoneType, None)``."""
    annotation = field.annotation
    if get_origin(annotation) in (Union, types.UnionType):
        members = get_args(annotation)
        # pydantic moves a Field's constraints into the one alternative of ``X | None``.
        outer = field.metadata if sum(m is not type(None) for m in members) == 1 else []
        return [_alternative(member, outer) for member in members]
    return [_alternative(annotation, field.metadata)]


def _alternative(annotation: Any, metadata: list) -> tuple[Any, Any]:
    if get_origin(annotation) is Annotated:
        base, *inner = get_args(annotation)
        constraints = [c for item in inner for c in (item.metadata if isinstance(item, FieldInfo) else [item])]
        return _alternative(base, [*metadata, *constraints])
    if get_origin(annotation) is Literal:
        return Literal, tuple(get_args(annotation))
    origin = get_origin(annotation) or annotation
    if origin in (int, float):
        return origin, _bounds(metadata)
    if origin is str:
        return str, next((c.min_length for c in metadata if isinstance(c, annotated_types.MinLen)), 0)
    return origin, None


def _bounds(metadata: list) -> dict[str, float]:
    names = {annotated_types.Gt: "gt", annotated_types.Ge: "ge", annotated_types.Lt: "lt", annotated_types.Le: "le"}
    return {names[type(c)]: getattr(c, names[type(c)]) for c in metadata if type(c) in names}


def phrase(kind: Any, detail: Any, bare: bool = False) -> str:
    """One alternative in words; ``bare``: a number's range alone (``in [0, 1)``, ``> 0``)."""
    if kind is type(None):
        return "null"
    if kind is bool:
        return "true or false"
    if kind is Literal:
        return repr(detail[0]) if len(detail) == 1 else f"one of {detail}"
    if kind is int:
        return _integer(detail)
    if kind is float:
        bounds = _interval(detail)
        return bounds if bare else f"a number {bounds}".rstrip()
    if kind is str:
        return "a non-empty string" if detail else "a string"
    return {dict: "a mapping", list: "a list"}.get(kind, getattr(kind, "__name__", str(kind)))


def _integer(bounds: dict[str, float]) -> str:
    low = bounds.get("ge", bounds["gt"] + 1 if "gt" in bounds else None)
    high = bounds.get("le", bounds["lt"] - 1 if "lt" in bounds else None)
    if high is not None:
        return f"an integer in [{low:g}, {high:g}]" if low is not None else f"an integer <= {high:g}"
    if low == 1:
        return "a positive integer"
    return f"an integer >= {low:g}" if low is not None else "an integer"


def _interval(bounds: dict[str, float]) -> str:
    low = ("(", bounds["gt"]) if "gt" in bounds else ("[", bounds["ge"]) if "ge" in bounds else None
    high = (")", bounds["lt"]) if "lt" in bounds else ("]", bounds["le"]) if "le" in bounds else None
    if low and high:
        if low[0] == "(" and high[0] == ")":
            return f"in the open interval ({low[1]:g}, {high[1]:g})"
        return f"in {low[0]}{low[1]:g}, {high[1]:g}{high[0]}"
    if low:
        return f"{'>' if low[0] == '(' else '>='} {low[1]:g}"
    if high:
        return f"{'<' if high[0] == ')' else '<='} {high[1]:g}"
    return ""
