from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.ingestion.nodes import clean_and_split_corpus, summarise_corpus


def create_pipeline(**kwargs) -> Pipeline:
    tags = ["ingestion", "data"]
    return Pipeline([
        Node(clean_and_split_corpus, ["raw_corpus", "params:corpus", "params:data"], "corpus_documents",
             name="clean_and_split_corpus", tags=tags),
        Node(summarise_corpus, "corpus_documents", "corpus_stats", name="summarise_corpus", tags=tags),
    ])
