"""The graph that `kedro viz` shows: pipelines, node names, tags and dataset layers."""

from __future__ import annotations

import pytest
from kedro.config import OmegaConfigLoader
from kedro.framework.project import configure_project

from bert_mlm.pipeline_registry import register_pipelines

EXPECTED_PIPELINES = {"ingestion", "tokenization", "sequences", "tuning", "training", "evaluation", "__default__"}


@pytest.fixture(autouse=True)
def configured_project():
    configure_project("bert_mlm")


LAYERS = {"raw", "intermediate", "primary", "feature", "model_input", "models", "model_output", "reporting"}


def test_registered_pipelines_and_chain(project_root):
    pipelines = register_pipelines()
    assert set(pipelines) == EXPECTED_PIPELINES
    default = pipelines["__default__"]
    assert [n.name for n in default.nodes] == [
        "clean_and_split_corpus",
        "build_tokenizer",
        "encode_corpus",
        "build_model_inputs",
        "tune_mask_probability",
        "train_masked_lm",
        "evaluate_masked_lm",
    ]
    # The chain's only free inputs are the raw corpora and parameters.
    free = {i for i in default.inputs() if not i.startswith("param")}
    assert free == {"raw_corpus", "extra_eval_corpus"}
    for name, pipeline in pipelines.items():
        if name != "__default__":
            assert all(name in node.tags for node in pipeline.nodes), name


def test_every_dataset_has_a_viz_layer(project_root):
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env="local")
    catalog = loader["catalog"]
    datasets = {d for d in register_pipelines()["__default__"].datasets() if not d.startswith("param")}
    assert datasets <= set(catalog), f"not in the catalog: {sorted(datasets - set(catalog))}"
    layers = {name: catalog[name]["metadata"]["kedro-viz"]["layer"] for name in datasets}
    assert set(layers.values()) <= LAYERS
    assert {"raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"} <= set(layers.values())
    versioned = [name for name in datasets if not name.startswith(("raw_", "extra_"))]
    assert all(catalog[name].get("versioned") for name in versioned), "every output is versioned"
