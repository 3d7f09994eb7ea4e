from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.sequences.nodes import build_model_inputs


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([Node(
        build_model_inputs, ["token_store", "tokenizer", "corpus_documents", "params:sequences", "params:training",
                             "params:masking", "params:evaluation", "params:tuning", "params:data"],
        ["sequence_index", "sequence_stats"], name="build_model_inputs", tags=["sequences", "data"])])
