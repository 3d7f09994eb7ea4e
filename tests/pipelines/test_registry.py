"""The graph that `kedro viz` shows: pipelines, node names, tags and dataset layers."""

from __future__ import annotations

import pytest
from kedro.config import OmegaConfigLoader
from kedro.framework.project import configure_project

from bert_mlm.pipeline_registry import register_pipelines
from tests.kedro_runs import DEFAULT_CHAIN_NODES

EXPECTED_PIPELINES = {
    "ingestion",
    "tokenization",
    "sequences",
    "tuning",
    "training",
    "finetune",
    "evaluation",
    "reporting",
    "mask_rate_comparison",
    "__default__",
}


@pytest.fixture(autouse=True)
def configured_project():
    configure_project("bert_mlm")


LAYERS = {"raw", "intermediate", "primary", "feature", "model_input", "models", "model_output", "reporting"}


def test_registered_pipelines_and_chain(project_root):
    pipelines = register_pipelines()
    assert set(pipelines) == EXPECTED_PIPELINES
    default = pipelines["__default__"]
    names = [n.name for n in default.nodes]
    assert set(names) == set(DEFAULT_CHAIN_NODES)
    chain = [name for name in names if not name.startswith("summarise_")]
    assert chain == [
        "clean_and_split_corpus",
        "build_tokenizer",
        "encode_corpus",
        "build_model_inputs",
        "tune_mask_probability",
        "record_run",
        "train_masked_lm",
        "evaluate_masked_lm",
        "finetune_classifier",
        "gather_metrics",
        "build_run_report",
        "write_model_card",
    ]
    # The chain's only free inputs are the raw corpora, the parameters and the run's facts (the hook's).
    free = {i for i in default.inputs() if not i.startswith("param")}
    assert free == {"raw_corpus", "extra_eval_corpus", "run_facts"}
    reporting = {n.name for n in pipelines["reporting"].nodes}
    assert reporting == {"record_run", "gather_metrics", "build_run_report", "write_model_card"}
    for name, pipeline in pipelines.items():
        if name not in ("__default__", "mask_rate_comparison"):
            own = [node for node in pipeline.nodes if node.name not in reporting]
            assert all(name in node.tags for node in own), name
    # A stage whose results belong to a model refreshes metrics.json, the report and the card (item 5 of
    # issue 35): its pipeline ends with the reporting nodes; the data stages do not.
    for name in ("tuning", "training", "finetune", "evaluation"):
        assert reporting <= {n.name for n in pipelines[name].nodes}, name
    for name in ("ingestion", "tokenization", "sequences"):
        assert not reporting & {n.name for n in pipelines[name].nodes}, name
    combined = pipelines["finetune"] + pipelines["evaluation"]  # --pipelines finetune,evaluation: merged, once each
    assert sorted(n.name for n in combined.nodes if n.name in reporting) == sorted(reporting)


def test_every_dataset_has_a_viz_layer(project_root):
    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env="local")
    catalog = loader["catalog"]
    datasets = {d for d in register_pipelines()["__default__"].datasets() if not d.startswith("param")}
    assert datasets <= set(catalog), f"not in the catalog: {sorted(datasets - set(catalog))}"
    layers = {name: catalog[name]["metadata"]["kedro-viz"]["layer"] for name in datasets}
    assert set(layers.values()) <= LAYERS
    assert {"raw", "intermediate", "feature", "model_input", "models", "model_output", "reporting"} <= set(
        layers.values()
    )
    # run_facts lives in memory (the hook's); the model card is written into the model's own version folder.
    versioned = [name for name in datasets if not name.startswith(("raw_", "extra_")) and
                 name not in ("run_facts", "model_card")]
    assert all(catalog[name].get("versioned") for name in versioned), "every output is versioned"



def test_mask_rate_comparison_is_one_namespace_per_variant(project_root):
    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    comparison = register_pipelines()["mask_rate_comparison"]
    assert len(VARIANTS) >= 2
    for variant in VARIANTS:
        names = {n.name for n in comparison.only_nodes_with_namespaces([variant]).nodes}
        assert names == {f"{variant}.variant_sections", f"{variant}.train_masked_lm", f"{variant}.finetune_classifier",
                         f"{variant}.evaluate_masked_lm", f"{variant}.gather_metrics", f"{variant}.write_model_card"}
    # The variants share the data stages, the model/training parameters and the evaluation corpus;
    # only their own overrides are namespaced. The run record reads the default chain's resolved sections
    # and study record (optional: a project that never tuned has none).
    free = {i for i in comparison.inputs() if not i.startswith("param")}
    assert free == {"raw_corpus", "extra_eval_corpus", "run_facts", "resolved_masking", "resolved_training",
                    "tuning_best_params"}
    parameters = {i for i in comparison.inputs() if i.startswith("params:")}
    assert {f"params:{v}.overrides" for v in VARIANTS} <= parameters
    assert {"params:model", "params:training", "params:masking"} <= parameters
    assert "compare_mask_rates" in {n.name for n in comparison.nodes}
    terminal = {
        "mask_rate_comparison",
        "mask_rate_comparison_report",
        "corpus_stats",
        "tokenization_stats",
        "vocabulary_coverage",
        "sequence_stats",
    }
    assert comparison.outputs() == terminal | {f"{v}.{name}" for v in VARIANTS for name in (
        "training_curves", "finetune_runs", "finetune_label_mapping", "finetuned_classifier", "model_card")}


def test_variant_outputs_resolve_to_versioned_catalog_entries(project_root):
    from kedro.io import DataCatalog, MemoryDataset

    from bert_mlm.pipelines.mask_rate_comparison import VARIANTS

    loader = OmegaConfigLoader(str(project_root / "conf"), base_env="base", default_run_env="local")
    catalog = DataCatalog.from_config(loader["catalog"])
    for variant in VARIANTS:
        for name in ("trained_model", "training_history", "training_summary", "evaluation_metrics", "metrics",
                     "finetune_metrics", "finetune_runs", "finetune_label_mapping", "finetuned_classifier",
                     "model_card"):
            dataset = catalog.get(f"{variant}.{name}")
            assert not isinstance(dataset, MemoryDataset), f"{variant}.{name}"
            assert f"/{variant}/" in str(dataset._describe()), f"{variant}.{name} is stored under its variant"
