"""Side-by-side mask rates: the training + evaluation nodes instantiated once per variant, each
in its own Kedro namespace, then one comparison table and report.

    kedro run --pipelines mask_rate_comparison                        # data stages, every variant, comparison
    kedro run --pipelines mask_rate_comparison --namespaces mask_030  # one variant (on the latest data)
"""

import warnings

from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines import evaluation, finetune, reporting, training
from bert_mlm.pipelines.mask_rate_comparison.nodes import compare_mask_rates, variant_sections

# To add a variant, add its name here and its overrides to parameters_mask_rate_comparison.yml.
VARIANTS = ("mask_015", "mask_030", "mask_045")

SHARED_INPUTS = {"corpus_documents", "token_store", "sequence_index", "tokenizer", "extra_eval_corpus", "run_facts",
                 "run_config"}
SHARED_PARAMETERS = {"params:model", "params:training", "params:masking", "params:evaluation", "params:sequences",
                     "params:distributed", "params:finetune", "params:corpus"}


def variant_pipeline(name: str) -> Pipeline:
    """The project's training and evaluation pipelines in namespace ``name``, with the variant's
    ``metrics.json`` and model card; the training node takes the variant's sections
    (``<name>.resolved_masking``, ...) where the default chain takes the tuning stage's."""
    sections = Node(variant_sections, ["params:masking", "params:training", "params:overrides"],
                    ["resolved_masking", "resolved_training", "tuning_best_params"], name="variant_sections")
    return Pipeline([sections, training.create_pipeline(), finetune.create_pipeline(), evaluation.create_pipeline(),
                     reporting.model_results()], namespace=name, inputs={shared: shared for shared in SHARED_INPUTS},
                    parameters=SHARED_PARAMETERS, tags=["mask_rate_comparison"])


def create_pipeline(**kwargs) -> Pipeline:
    # Kedro warns about any dotted dataset name outside its own namespace; reading every
    # variant's namespaced outputs is exactly what the comparison is for.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="One or more dataset names contain '.'")
        inputs = {**{f"{name}_metrics": f"{name}.metrics" for name in VARIANTS},
                  **{f"{name}_history": f"{name}.training_history" for name in VARIANTS},
                  **{f"{name}_finetune": f"{name}.finetune_metrics" for name in VARIANTS}}
        comparison = Node(compare_mask_rates, inputs, ["mask_rate_comparison", "mask_rate_comparison_report"],
                          name="compare_mask_rates", tags=["mask_rate_comparison", "reporting"])
    record = Pipeline([node for node in reporting.create_pipeline().nodes if node.name == "record_run"])
    return Pipeline([*(variant_pipeline(name) for name in VARIANTS), comparison, record])
