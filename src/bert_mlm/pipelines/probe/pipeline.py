from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.probe.nodes import probe_representations


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                probe_representations,
                inputs=["trained_model", "params:probe"],
                outputs="probe_metrics",
                name="probe_representations",
                tags=["probe", "evaluation"],
            )
        ]
    )
