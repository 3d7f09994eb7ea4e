"""``bert-mlm params``: every parameter in words, generated from the types; the JSON schema for
editors; every field has its one-line help, and conf/base repeats it as the key's comment."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from bert_mlm.config import SECTIONS, ExperimentConfig, VariantOverrides
from bert_mlm.config.describe import json_schema, params_command

TYPES = [*SECTIONS.values(), VariantOverrides]


@pytest.mark.parametrize("section", TYPES, ids=lambda section: section.__name__)
def test_every_field_has_a_one_line_help(section):
    assert section.__doc__ and section.__doc__.strip()
    missing = [name for name, field in section.model_fields.items()
               if not field.description or "\n" in field.description]
    assert missing == [], f"{section.__name__}: give these fields a one-line description="


def test_params_lists_every_section_and_parameter():
    result = CliRunner().invoke(params_command, [])
    assert result.exit_code == 0, result.output
    for name, section in SECTIONS.items():
        assert re.search(rf"^{name}: .*\n  \(conf/base/parameters_{name}\.yml\)$", result.output, re.M), name
        for field, info in section.model_fields.items():
            assert re.search(rf"^  {name}\.{field}\s", result.output, re.M), f"{name}.{field}"
            assert info.description in result.output
    assert re.search(r"^<variant>\.overrides: .*\n  \(conf/base/parameters_mask_rate_comparison\.yml, under each "
                     r"variant's name", result.output, re.M)
    assert re.search(r"^  <variant>\.overrides\.masking\s+mapping", result.output, re.M)
    assert not re.search(r"^\s*mask_030", result.output, re.M)  # no one variant listed as if it were a section
    # type, default and range on the parameter's line
    assert re.search(r"^  masking\.probability\s+float\s+0\.15\s+a number in the open interval \(0, 1\)$",
                     result.output, re.M)
    assert re.search(r"^  training\.schedule\s+str\s+\"linear\"\s+one of \('linear', 'cosine', "
                     r"'constant_with_warmup'\)$", result.output, re.M)


def test_params_of_one_section():
    result = CliRunner().invoke(params_command, ["tuning"])
    assert result.exit_code == 0 and result.output.startswith("tuning: ") and "masking." not in result.output
    assert CliRunner().invoke(params_command, ["tunning"]).exit_code == 2


def test_the_json_schema_describes_every_section_and_refuses_unknown_keys():
    result = CliRunner().invoke(params_command, ["--json-schema"])
    schema = json.loads(result.output)
    assert schema == json_schema()
    assert set(SECTIONS) <= set(schema["properties"]) and "variants" not in schema["properties"]
    masking = schema["$defs"]["MaskingConfig"]
    assert masking["additionalProperties"] is False
    assert masking["properties"]["probability"] == {
        "default": 0.15, "description": SECTIONS["masking"].model_fields["probability"].description,
        "exclusiveMaximum": 1, "exclusiveMinimum": 0, "title": "Probability", "type": "number"}
    assert schema["additionalProperties"]["properties"]["overrides"] == {"$ref": "#/$defs/VariantOverrides"}
    assert ExperimentConfig.model_json_schema()  # pydantic's own, unchanged


KEY = re.compile(r"^  (?P<key>\w+):(?P<value>[^#]*?)(?:\s+# (?P<comment>.*))?$")


@pytest.mark.parametrize("name", list(SECTIONS))
def test_conf_base_comments_are_the_help(project_root, name):
    """Each parameter's line in conf/base/parameters_<section>.yml ends with its help as a comment,
    word for word: the file and `bert-mlm params` cannot drift apart."""
    lines = (project_root / "conf" / "base" / f"parameters_{name}.yml").read_text(encoding="utf-8").splitlines()
    assert f"{name}:" in lines, f"parameters_{name}.yml holds the {name} section"
    comments = {m["key"]: m["comment"] for m in map(KEY.match, lines) if m}
    fields = SECTIONS[name].model_fields
    assert list(comments) == list(fields), "one line per parameter, in the type's order"
    assert {key: comment for key, comment in comments.items() if comment != fields[key].description} == {}
