"""``finetune``: several tasks share the section's keys (one home), each validated as the section
is; baselines in a list; ``tuning.finetune_task`` names one of the tasks."""

from __future__ import annotations

import pytest

from bert_mlm.config import ExperimentConfig, FinetuneConfig
from bert_mlm.errors import UserError


@pytest.fixture
def files(tmp_path):
    reviews, entities = tmp_path / "评论.csv", tmp_path / "ner.conll"
    reviews.write_text("review,label\n很好,1\n", encoding="utf-8")
    entities.write_text("王\tB-PER\n英\tI-PER\n\nParis\tB-LOC\n", encoding="utf-8")
    return str(reviews), str(entities)


def test_each_task_takes_the_sections_keys_with_its_own_over_them(files):
    reviews, entities = files
    config = FinetuneConfig(seeds=2, text_column="review", tasks={
        "sentiment": {"train_path": reviews}, "ner": {"train_path": entities, "seeds": 1, "task": "token"}})
    tasks = config.task_configs()
    assert list(tasks) == ["sentiment", "ner"] and config.enabled and config.train_path is None
    assert (tasks["sentiment"].seeds, tasks["sentiment"].text_column, tasks["sentiment"].train_path) == (2, "review",
                                                                                                         reviews)
    assert (tasks["ner"].seeds, tasks["ner"].task, tasks["ner"].tasks) == (1, "token", {})
    # One task of train_path, unnamed, as before; none at all without either.
    assert list(FinetuneConfig(train_path=reviews).task_configs()) == [""] and not FinetuneConfig().task_configs()


@pytest.mark.parametrize(("task", "message"), [
    ({"trian_path": "x"}, r"^finetune\.tasks\.ner: unknown parameter\(s\) finetune\.tasks\.ner\.trian_path; "
                          r"did you mean 'train_path'\?$"),
    ({"seeds": 0}, r"^finetune\.tasks\.ner\.seeds: 0 must be a positive integer$"),
    ({"train_path": "/nowhere.conll"}, r"^finetune\.tasks\.ner: finetune\.train_path: '/nowhere\.conll' is not a "
                                       r"file$"),
    ({"task": "token"}, r"^finetune\.tasks\.ner\.train_path: required"),
    ({"train_path": "x", "tasks": {}}, r"^finetune\.tasks\.ner\.tasks: a task cannot hold tasks$"),
])
def test_a_bad_task_is_one_line_naming_it(task, message):
    with pytest.raises(UserError, match=message):
        FinetuneConfig(tasks={"ner": task})


def test_baselines_in_a_list(files):
    assert FinetuneConfig(baseline=["auto", "random"]).baselines == ["auto", "random"]
    assert FinetuneConfig(baseline="none").baselines == [] and FinetuneConfig().baselines == ["auto"]
    for bad in (["auto", "auto"], ["random", "none"]):
        with pytest.raises(UserError, match=r"^finetune\.baseline: .* must list different baselines"):
            FinetuneConfig(baseline=bad)


def test_the_study_judges_by_a_named_task_or_the_mean(files):
    reviews, entities = files
    finetune = {"tasks": {"sentiment": {"train_path": reviews, "text_column": "review"},
                          "ner": {"train_path": entities}}}
    config = ExperimentConfig.from_parameters({"finetune": finetune, "tuning": {"objective": "finetune",
                                                                                "finetune_task": "ner"}})
    assert config.tuning.finetune_task == "ner"
    with pytest.raises(UserError, match=r"^tuning\.finetune_task: 'nre' is not one of finetune\.tasks \(sentiment, "
                                        r"ner\) or mean$"):
        ExperimentConfig.from_parameters({"finetune": finetune, "tuning": {"finetune_task": "nre"}})
    with pytest.raises(UserError, match=r"finetune\.tasks \(none: one task, finetune\.train_path\) or mean"):
        ExperimentConfig.from_parameters({"finetune": {"train_path": reviews}, "tuning": {"finetune_task": "ner"}})
