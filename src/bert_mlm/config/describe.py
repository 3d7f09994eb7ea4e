"""Every parameter in words, from the types (``bert-mlm params``), and the JSON schema of the
parameters files for editors (``bert-mlm params --json-schema``)."""

from __future__ import annotations

import json
from typing import Literal

import click
from pydantic.fields import FieldInfo

from bert_mlm.config.base import alternatives, requirement, worded
from bert_mlm.config.experiment import SECTIONS, ExperimentConfig
from bert_mlm.config.variants import VariantOverrides

# The mask-rate variants' overrides, listed once for every variant (mask_015, mask_030, ... are
# conf's, not the types'): `bert-mlm params variant`.
VARIANTS_SECTION = "variant"


def type_name(field: FieldInfo) -> str:
    """``float``, ``int | null``, ``str | float`` (a choice is a ``str``), ``mapping``..."""
    names = {Literal: "str", type(None): "null", dict: "mapping", list: "list"}
    return " | ".join(names.get(kind, getattr(kind, "__name__", str(kind))) for kind, _ in alternatives(field))


def range_text(field: FieldInfo) -> str:
    """What ``field`` allows beyond its type (a range, the choices, non-empty), or ``""``."""
    constrained = any(detail for kind, detail in alternatives(field) if kind is not type(None))
    return requirement(field) if worded(field) or constrained else ""


def parameters_text(only: str | None = None) -> str:
    """Every section (or ``only`` that one), its file and its parameters: type, default, what is
    allowed and a one-line help."""
    sections = {**SECTIONS, VARIANTS_SECTION: VariantOverrides}
    if only is not None:
        sections = {only: sections[only]}
    blocks = []
    for name, section in sections.items():
        where = ("conf/base/parameters_mask_rate_comparison.yml, under each variant's name: "
                 "--params mask_030.overrides.masking.probability=0.25"
                 if section is VariantOverrides else f"conf/base/parameters_{name}.yml")
        prefix = "<variant>.overrides" if section is VariantOverrides else name
        rows = [(f"{prefix}.{field}", type_name(info),  # parameter, type, default, allowed, help
                 json.dumps(info.get_default(call_default_factory=True), ensure_ascii=False), range_text(info),
                 info.description or "") for field, info in section.model_fields.items()]
        widths = [max(len(row[column]) for row in rows) for column in range(3)]
        lines = [f"{prefix}: {' '.join((section.__doc__ or '').split())}", f"  ({where})"]
        for parameter, kind, default, allowed, help_text in rows:
            lines.append(f"  {parameter:<{widths[0]}}  {kind:<{widths[1]}}  {default:<{widths[2]}}  {allowed}".rstrip())
            lines.append(f"  {'':<{widths[0]}}  {help_text}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def json_schema() -> dict:
    """The JSON schema of the parameters (all files merged): each section an object whose keys are
    checked, typed, ranged and described; the mask-rate variants hold ``overrides``."""
    schema = ExperimentConfig.model_json_schema()
    variants = schema["properties"].pop("variants")
    schema["title"] = "bert-mlm parameters"
    schema["description"] = "conf/<env>/parameters_*.yml of a bert-mlm project, merged"
    overrides = variants["additionalProperties"]
    schema["additionalProperties"] = {"type": "object",
                                      "description": "a mask_rate_comparison variant (mask_015, mask_030, ...)",
                                      "properties": {"overrides": overrides}, "additionalProperties": False}
    return schema


@click.command("params")
@click.argument("section", required=False, type=click.Choice([*SECTIONS, VARIANTS_SECTION]))
@click.option("--json-schema", "schema", is_flag=True, help="Print the parameters' JSON schema (for editors) instead.")
def params_command(section: str | None, schema: bool) -> None:
    """List every parameter (or one SECTION's): its type, default, what it allows and a one-line
    help, from the types that validate them. Set them in conf/<env>/parameters_<section>.yml or
    with `bert-mlm run --params section.key=value`."""
    if schema:
        click.echo(json.dumps(json_schema(), indent=2, ensure_ascii=False))
        return
    click.echo(parameters_text(section), nl=False)
