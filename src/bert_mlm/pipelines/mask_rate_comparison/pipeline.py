"""Side-by-side mask rates: the training + evaluation nodes instantiated once per variant, each
in its own Kedro namespace, then one comparison table and report.

    kedro run --pipeline mask_rate_comparison                        # data stages, every variant, comparison
    kedro run --pipeline mask_rate_comparison --namespaces mask_030  # one variant (on the latest data)

Each variant's values live in conf/base/parameters_mask_rate_comparison.yml under its name.
"""

import warnings

from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.evaluation.nodes import evaluate_masked_lm
from bert_mlm.pipelines.mask_rate_comparison.nodes import compare_mask_rates, variant_overrides
from bert_mlm.pipelines.training.nodes import train_masked_lm

# To add a variant, add its name here and its overrides to parameters_mask_rate_comparison.yml.
VARIANTS = ("mask_015", "mask_030", "mask_045")

SHARED_INPUTS = {"model_input_sequences", "tokenizer", "token_ids", "extra_eval_corpus"}
SHARED_PARAMETERS = {
    "params:model", "params:training", "params:masking", "params:evaluation", "params:sequences", "params:distributed",
}


def variant_pipeline(name: str) -> Pipeline:
    nodes = [
        Node(variant_overrides, "params:overrides", "overrides", name="variant_overrides"),
        Node(
            train_masked_lm,
            inputs=[
                "model_input_sequences", "tokenizer", "overrides", "params:model", "params:training",
                "params:masking", "params:evaluation", "params:sequences", "params:distributed",
            ],
            outputs=["trained_model", "training_history", "training_curves", "training_summary"],
            name="train_masked_lm",
            tags=["training", "model"],
        ),
        Node(
            evaluate_masked_lm,
            inputs=[
                "trained_model", "model_input_sequences", "token_ids", "extra_eval_corpus",
                "training_summary", "params:evaluation", "params:sequences",
            ],
            outputs="metrics",
            name="evaluate_masked_lm",
            tags=["evaluation"],
        ),
    ]
    return Pipeline(nodes, namespace=name, inputs=SHARED_INPUTS, parameters=SHARED_PARAMETERS, tags=["mask_rate_comparison"])


def create_pipeline(**kwargs) -> Pipeline:
    # Kedro warns about any dotted dataset name outside its own namespace; reading every
    # variant's namespaced outputs is exactly what the comparison is for.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="One or more dataset names contain '.'")
        comparison = Node(
            compare_mask_rates,
            inputs={
                **{f"{name}_metrics": f"{name}.metrics" for name in VARIANTS},
                **{f"{name}_history": f"{name}.training_history" for name in VARIANTS},
            },
            outputs=["mask_rate_comparison", "mask_rate_comparison_report"],
            name="compare_mask_rates",
            tags=["mask_rate_comparison", "reporting"],
        )
    return Pipeline([*(variant_pipeline(name) for name in VARIANTS), comparison])
