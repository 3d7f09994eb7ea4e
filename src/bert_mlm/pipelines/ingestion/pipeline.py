from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.ingestion.nodes import clean_and_split_corpus, summarise_corpus


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                clean_and_split_corpus,
                inputs=["raw_corpus", "params:corpus", "params:data"],
                outputs="corpus_documents",
                name="clean_and_split_corpus",
                tags=["ingestion", "data"],
            ),
            Node(
                summarise_corpus,
                inputs="corpus_documents",
                outputs="corpus_stats",
                name="summarise_corpus",
                tags=["ingestion", "data"],
            ),
        ]
    )
