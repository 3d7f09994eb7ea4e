"""Typed parameter sections: dataclasses built from ``conf/`` dictionaries with clear errors."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from bert_mlm.core.errors import UserError

T = TypeVar("T")


def build_config(cls: type[T], values: dict[str, Any] | None, section: str) -> T:
    """Instantiate the dataclass ``cls`` from a parameters section.

    Unknown keys are refused (a typo such as ``max_step`` would otherwise be ignored silently),
    and the dataclass's own validation names the parameter, the value and what is allowed.
    """
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise UserError(
            f"{section}: unknown parameter(s) {', '.join(f'{section}.{k}' for k in unknown)}; "
            f"allowed: {', '.join(sorted(known))}"
        )
    for field in dataclasses.fields(cls):
        annotation = str(field.type)
        value = values.get(field.name)
        # YAML's true/false are ints to Python: batch_size=true would train with batches of 1.
        if isinstance(value, bool) and "bool" not in annotation and ("int" in annotation or "float" in annotation):
            raise UserError(f"{section}.{field.name}: {value!r} must be a number, not true/false")
    try:
        return cls(**values)
    except TypeError as error:
        raise UserError(f"{section}: {error}") from error
