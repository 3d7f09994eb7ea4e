from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.tokenization.nodes import build_tokenizer, encode_corpus, summarise_tokens


def create_pipeline(**kwargs) -> Pipeline:
    tags = ["tokenization", "data"]
    return Pipeline([
        Node(build_tokenizer, ["corpus_documents", "params:tokenizer", "params:model", "params:data"],
             ["tokenizer", "vocabulary_coverage"], name="build_tokenizer", tags=tags),
        # whole-word masking on Chinese words: the boundaries are stored while encoding
        Node(encode_corpus, ["corpus_documents", "tokenizer", "params:data", "params:masking", "params:evaluation",
                             "params:tuning"], "token_store", name="encode_corpus", tags=tags),
        Node(summarise_tokens, ["token_store", "tokenizer"], "tokenization_stats", name="summarise_tokens", tags=tags),
    ])
