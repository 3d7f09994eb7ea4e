"""Typed parameter sections: dataclasses built from ``conf/`` dictionaries with clear errors."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

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
        raise ValueError(
            f"{section}: unknown parameter(s) {', '.join(f'{section}.{k}' for k in unknown)}; "
            f"allowed: {', '.join(sorted(known))}"
        )
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"{section}: {error}") from error
