"""The training loop on a tiny real model: learning, exact resume, AMP order, non-finite losses."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from bert_mlm.config import EvaluationConfig, MaskingConfig, ModelConfig, TrainingConfig
from bert_mlm.config.training import CONTINUED_LR_FACTOR, CONTINUED_WARMUP_FRACTION
from bert_mlm.core.common import device as device_module
from bert_mlm.core.common.device import resolve_precision
from bert_mlm.core.evaluate.protocol import prepare_evaluation_set, score_sequences
from bert_mlm.core.model import checkpoints as checkpoints_module
from bert_mlm.core.model.bert import build_model
from bert_mlm.core.model.checkpoints import list_checkpoints, read_checkpoint, run_folders, save_checkpoint
from bert_mlm.core.model.optim import parameter_groups
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.sequences import Collator
from bert_mlm.core.train import loop as training_module
from bert_mlm.core.train import records as records_module
from bert_mlm.core.train.loop import Validation, train, validation_count, validation_due
from bert_mlm.core.train.records import NonFiniteLossError
from bert_mlm.errors import UserError

VOCAB = 64
SPECIAL = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]


class TinyTokenizer:
    """Just what build_model reads from a tokenizer."""

    pad_token_id = 0

    def __len__(self) -> int:
        return VOCAB


def repetitive_sequences(count: int = 96, length: int = 24, seed: int = 0) -> list[np.ndarray]:
    """Sequences drawn from a few fixed patterns: a tiny model can learn to fill them in."""
    rng = np.random.default_rng(seed)
    patterns = [rng.integers(5, VOCAB, size=length - 2) for _ in range(4)]
    return [np.concatenate(([2], patterns[i % 4], [3])).astype(np.int32) for i in range(count)]


def setup(**overrides):
    model = build_model(
        ModelConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=32
        ),
        TinyTokenizer(),
        seed=0,
    )
    ids = TokenIds(pad=0, mask=4, special=SPECIAL, replacement=torch.arange(5, VOCAB))
    settings = {"max_steps": 12, "batch_size": 8, "learning_rate": 3e-3, "warmup_steps": 2, "progress": False}
    config = TrainingConfig(**{**settings, **overrides})
    return model, ids, config, Collator(0, SPECIAL, 32, "dynamic")


def test_loss_falls_on_learnable_data():
    model, ids, config, collator = setup()
    config = config.replace(max_steps=80, learning_rate=5e-3, schedule="constant_with_warmup")
    result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    history = result.history
    assert len(history) == 80
    assert history["loss"].tail(10).mean() < 0.6 * history["loss"].head(10).mean()
    assert result.train_tokens == history["tokens"].sum() > 0
    assert (history["masked_tokens"] > 0).all()


def test_same_seed_same_weights_and_different_seed_differs():
    runs = []
    for seed in (1, 1, 2):
        model, ids, config, collator = setup(seed=seed)
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
        runs.append(model.state_dict())
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert not all(torch.equal(runs[0][k], runs[2][k]) for k in runs[0])


def crash_then_resume(tmp_path, sequences, masking, crash_at: int):
    """Train until a crash after step ``crash_at``, then resume from the last checkpoint (every
    4 steps) in a fresh model; returns the fresh model, the resumed run and the crash folder."""
    crash_dir = str(tmp_path / "crashed")
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=crash_dir)

    def crash(step, _record):
        if step == crash_at:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train(model, sequences, ids, masking, config, collator, on_step=crash)
    checkpoints = [p.name for p in list_checkpoints(run_folders(crash_dir)[-1])]
    fresh, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=crash_dir, resume=True)
    return fresh, train(fresh, sequences, ids, masking, config, collator), checkpoints


def test_resume_after_a_crash_gives_the_same_weights(tmp_path):
    sequences = repetitive_sequences()
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(tmp_path / "straight"))
    train(model, sequences, ids, MaskingConfig(), config, collator)
    uninterrupted = model.state_dict()

    fresh, result, checkpoints = crash_then_resume(tmp_path, sequences, MaskingConfig(), crash_at=10)
    assert checkpoints == ["step-00000004", "step-00000008"]
    assert result.resumed_from_step == 8
    assert list(result.history["step"]) == list(range(1, 13))
    resumed = fresh.state_dict()
    for key in uninterrupted:
        assert torch.equal(uninterrupted[key], resumed[key]), key


class MixedSequences(list):
    """In-memory sequences with a mixture plan, as the stored train split carries one."""

    mixture = None


def test_a_mixture_resumes_exactly_across_its_epochs(tmp_path):
    """Epochs drawn by a 0.8/0.2 mixture (the small source repeated 4.8x, the large one thinned):
    a run that crashed and resumed, across an epoch boundary, ends with the uninterrupted run's weights."""
    from bert_mlm.core.data.sources.settings import source_settings
    from bert_mlm.core.tokens.blend import SourceSpan, plan_mixture

    sequences = MixedSequences(repetitive_sequences())
    sequences.mixture = plan_mixture([SourceSpan("small", 0, 16), SourceSpan("large", 16, 96)],
                                     source_settings({"small": {"weight": 0.8}, "large": {"weight": 0.2}}))
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(tmp_path / "straight"))
    straight = train(model, sequences, ids, MaskingConfig(), config.model_copy(update={"max_steps": 16}), collator)
    assert straight.history["epoch"].max() == 1  # 96 drawn sequences a epoch: 12 batches of 8
    uninterrupted = model.state_dict()

    crash_dir = str(tmp_path / "crashed")
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=crash_dir, max_steps=16)

    def crash(step, _record):
        if step == 14:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train(model, sequences, ids, MaskingConfig(), config, collator, on_step=crash)
    fresh, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=crash_dir, resume=True, max_steps=16)
    resumed = train(fresh, sequences, ids, MaskingConfig(), config, collator)
    assert resumed.resumed_from_step == 12
    for key, value in fresh.state_dict().items():
        assert torch.equal(uninterrupted[key], value), key
    # Resuming after a weight changed is refused, saying the weights changed (not only two digests).
    sequences.mixture = plan_mixture([SourceSpan("small", 0, 16), SourceSpan("large", 16, 96)],
                                     source_settings({"small": {"weight": 0.5}, "large": {"weight": 0.5}}))
    fresh, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=crash_dir, resume=True, max_steps=20)
    with pytest.raises(UserError, match=r"what differs: .*mixture\.large 'weight 0\.2' -> 'weight 0\.5'; "
                                        r"mixture\.small 'weight 0\.8' -> 'weight 0\.5'"):
        train(fresh, sequences, ids, MaskingConfig(), config, collator)


def test_span_masking_resumes_byte_identical(tmp_path):
    """Whole-word n-grams (pieces 5-9 continue a word here): a run that crashed and resumed ends with
    the uninterrupted run's weights, as token and whole-word masking do."""
    sequences, span = repetitive_sequences(), MaskingConfig(span="ngram")
    words = Collator(0, SPECIAL, 32, "dynamic", whole_word=True, continuation_ids=list(range(5, 10)))
    model, ids, config, _ = setup(checkpoint_every=4, checkpoint_dir=str(tmp_path / "straight"))
    train(model, sequences, ids, span, config, words)
    uninterrupted = model.state_dict()
    crash_dir = str(tmp_path / "crashed")
    model, ids, config, _ = setup(checkpoint_every=4, checkpoint_dir=crash_dir)

    def crash(step, _record):
        if step == 10:
            raise KeyboardInterrupt("simulated crash")

    with pytest.raises(KeyboardInterrupt):
        train(model, sequences, ids, span, config, words, on_step=crash)
    fresh, ids, config, _ = setup(checkpoint_every=4, checkpoint_dir=crash_dir, resume=True)
    assert train(fresh, sequences, ids, span, config, words).resumed_from_step == 8
    for key, value in fresh.state_dict().items():
        assert torch.equal(uninterrupted[key], value), key


def test_a_linear_mask_schedule_reaches_its_end_and_resumes_exactly(tmp_path):
    sequences = repetitive_sequences()
    schedule = MaskingConfig(0.4, schedule="linear", final_probability=0.1)
    model, ids, config, collator = setup(checkpoint_every=4, checkpoint_dir=str(tmp_path / "straight"))
    straight = train(model, sequences, ids, schedule, config, collator)
    rates = straight.history["mask_probability"].tolist()
    assert rates[0] == pytest.approx(0.4) and rates[-1] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))  # decreasing every step
    assert straight.history["masked_tokens"].iloc[:3].mean() > 2 * straight.history["masked_tokens"].iloc[-3:].mean()
    uninterrupted = model.state_dict()

    fresh, resumed, _ = crash_then_resume(tmp_path, sequences, schedule, crash_at=6)
    assert resumed.resumed_from_step == 4
    assert resumed.history["mask_probability"].tolist() == rates
    for key, value in fresh.state_dict().items():
        assert torch.equal(uninterrupted[key], value), key


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"schedule": "cosine"}, r"masking\.schedule: 'cosine'"),
    ({"schedule": "linear"}, r"masking\.final_probability: a linear"),
    ({"schedule": "linear", "final_probability": 1.2}, r"masking\.final_probability: 1\.2 must be in"),
    ({"probability": None}, r"masking\.probability: None must be a number"),
])
def test_mask_schedule_parameters_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MaskingConfig(**kwargs)


def test_fp16_grad_scaler_unscales_before_clipping(monkeypatch):
    if resolve_precision("fp16", torch.device("cpu")) != "fp16":
        pytest.skip("no fp16 autocast on this CPU build")
    seen_stages = []
    real_clip = torch.nn.utils.clip_grad_norm_
    created = []
    real_scaler = torch.amp.GradScaler

    class RecordingScaler(real_scaler):  # the real scaler, observed
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            created.append(self)

    def clip_and_record(parameters, max_norm, *args, **kwargs):
        scaler = created[-1]
        stage = next(iter(scaler._per_optimizer_states.values()))["stage"]
        seen_stages.append(stage.name)
        return real_clip(parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(training_module.torch.amp, "GradScaler", RecordingScaler)
    monkeypatch.setattr(training_module.torch.nn.utils, "clip_grad_norm_", clip_and_record)
    model, ids, config, collator = setup(precision="fp16", max_steps=4)
    result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    assert created and created[-1].is_enabled()
    assert seen_stages == ["UNSCALED"] * 4
    assert result.precision == "fp16"
    assert np.isfinite(result.history["loss"]).all()
    assert (result.history["loss_scale"] > 0).all()


def test_persistent_nonfinite_loss_stops_with_a_clear_error(tmp_path):
    model, ids, config, collator = setup(
        checkpoint_every=2, checkpoint_dir=str(tmp_path), max_nonfinite_steps=3, max_steps=20
    )

    def poison(step, _record):
        if step == 4:
            with torch.no_grad():
                model.bert.embeddings.word_embeddings.weight.fill_(float("nan"))

    with pytest.raises(NonFiniteLossError, match=r"non-finite for 3 consecutive steps \(last at step 7\)"):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, on_step=poison)
    assert list_checkpoints(run_folders(tmp_path)[-1])[-1].name == "step-00000004"  # the last good one is kept


def test_host_reads_the_device_values_only_at_record_steps(monkeypatch):
    """Loss, accuracy and gradient norm stay on the device between record steps (every
    record_every-th and the last): one read per window, yet every step in the history, and the
    same weights and per-step values as reading every step."""
    reads = []
    real_read = records_module.RecordWindow.read

    def counting_read(window):  # the real reader, observed
        reads.append([record.step for record, _ in window.pending])
        return real_read(window)

    monkeypatch.setattr(records_module.RecordWindow, "read", counting_read)
    runs = {}
    for record_every in (1, 5):
        reads.clear()
        model, ids, config, collator = setup(record_every=record_every)
        result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
        runs[record_every] = (model.state_dict(), result.history, list(reads))
    assert runs[5][2] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12]]
    assert len(runs[1][2]) == 12
    assert all(torch.equal(runs[1][0][k], runs[5][0][k]) for k in runs[1][0])
    values = ["step", "loss", "accuracy", "grad_norm", "masked_tokens", "tokens", "learning_rate", "loss_scale"]
    pd.testing.assert_frame_equal(runs[1][1][values], runs[5][1][values])
    assert (runs[5][1]["seconds"] > 0).all() and runs[5][1]["tokens_per_second"].gt(0).all()
    with pytest.raises(ValueError, match="training.record_every"):
        TrainingConfig(record_every=0)


def test_a_nonfinite_streak_between_record_steps_is_seen_at_the_next_one_and_skipped_on_the_device():
    """A streak of max_nonfinite_steps that ends between record steps stops the run at the next
    record step, naming the step where the streak reached the limit; the diverged steps left
    the weights finite (the fused AdamW skipped them on the device, no host check per step)."""
    model, ids, config, collator = setup(record_every=4, max_nonfinite_steps=3, max_steps=20)
    calls = []

    def poison_from_step_5(_module, _inputs, output):
        calls.append(1)
        return output * float("nan") if len(calls) >= 5 else output

    model.bert.embeddings.word_embeddings.register_forward_hook(poison_from_step_5)
    with pytest.raises(NonFiniteLossError, match=r"non-finite for 3 consecutive steps \(last at step 7\)"):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    assert len(calls) == 8  # detected at the record step 8, one step after the streak reached 3
    assert all(torch.isfinite(value).all() for value in model.state_dict().values())


def test_no_weight_decay_on_bias_and_layernorm():
    model, *_ = setup()
    decay, no_decay = parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim >= 2 for p in decay["params"])
    assert any("LayerNorm" in names[id(p)] for p in no_decay["params"])
    assert all(not names[id(p)].endswith("bias") for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.01


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 1, {"x": torch.ones(2)}, keep=2)

    def failing_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints_module, "save_file", failing_save)
    with pytest.raises(OSError):
        save_checkpoint(tmp_path, 2, {"x": torch.zeros(2)}, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000001"]
    assert read_checkpoint(list_checkpoints(tmp_path)[0])["x"].sum() == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_steps": 0}, "training.max_steps"),
        ({"batch_size": -1}, "training.batch_size"),
        ({"precision": "fp8"}, "training.precision"),
        ({"learning_rate": 0}, "training.learning_rate"),
        ({"checkpoint_every": 5, "checkpoint_dir": None}, "training.checkpoint_dir"),
        ({"eval_every": -1}, "training.eval_every: -1 must be an integer >= 0"),
        ({"eval_masked_tokens": 0}, "training.eval_masked_tokens: 0 must be a positive integer"),
        ({"keep_best": True}, "training.keep_best: picks the step with the best validation loss; set training"),
    ],
)
def test_bad_training_config_names_the_parameter(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**overrides)


def test_cuda_requested_without_cuda_is_refused():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ValueError, match="training.device"):
        device_module.resolve_device("cuda")
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"


def test_epochs_set_the_budget():
    model, ids, config, collator = setup(epochs=2, batch_size=8, max_steps=None)
    result = train(model, repetitive_sequences(40), ids, MaskingConfig(), config, collator)
    assert len(result.history) == 2 * 5  # 40 sequences / 8 per batch = 5 steps per epoch
    assert list(result.history["epoch"].unique()) == [0, 1]


def test_auto_learning_rate_scales_with_width():
    assert TrainingConfig().peak_learning_rate(128) == pytest.approx(2e-3)
    assert TrainingConfig().peak_learning_rate(256) == pytest.approx(1e-3)
    assert TrainingConfig(learning_rate=3e-4).peak_learning_rate(256) == 3e-4
    # Local initialisation wider than 128 trains at half the rule; at 128 and below, and when given, at the rule.
    assert TrainingConfig().peak_learning_rate(256, local=True) == pytest.approx(5e-4)
    assert TrainingConfig().peak_learning_rate(128, local=True) == pytest.approx(2e-3)
    assert TrainingConfig(learning_rate=3e-4).peak_learning_rate(256, local=True) == 3e-4
    assert TrainingConfig().peak_learning_rate(256, continued=True, local=True) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="training.learning_rate: 'fast' must be a number > 0 or 'auto'"):
        TrainingConfig(learning_rate="fast")
    model, ids, config, collator = setup(learning_rate="auto", max_steps=2)
    result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)
    assert result.learning_rate == pytest.approx(2e-3 * 128 / 32)
    assert result.history["learning_rate"].max() <= result.learning_rate + 1e-12


def test_auto_schedule_from_scratch_and_for_continued_pretraining():
    """`auto` learning rate and warmup: the from-scratch rules (the loop's own, the value stays
    `auto`), or the continued-pretraining rules when the run starts from model.init_from; given
    values are kept; each resolution says where it came from."""
    scratch, note = TrainingConfig().resolved(256, continued=False, train_sequences=1000)
    assert scratch.learning_rate == "auto" and scratch.warmup_steps == 36  # 10 % of the default 360 steps
    assert note == "learning rate 0.001 (auto: 2e-3 x 128 / hidden size 256), warmup 36 steps (auto: 10% of 360 steps)"
    # Halved for local initialisation wider than 128: the number the loop trains with, and why.
    halved, note = TrainingConfig().resolved(256, continued=False, train_sequences=1000, local=True)
    assert halved.learning_rate == pytest.approx(5e-4)
    assert note.startswith("learning rate 0.0005 (auto: 2e-3 x 128 / hidden size 256, halved for local initialisation "
                           "wider than 128), ")
    continued, note = TrainingConfig(max_steps=200).resolved(768, continued=True, train_sequences=1000)
    assert continued.learning_rate == pytest.approx(CONTINUED_LR_FACTOR * 2e-3 * 128 / 768)
    assert continued.warmup_steps == round(CONTINUED_WARMUP_FRACTION * 200)
    assert "(auto for continued pretraining (model.init_from): " in note and "measured in BENCHMARKS.md" in note
    given, note = TrainingConfig(learning_rate=3e-4, warmup_steps=5).resolved(768, True, 1000)
    assert (given.learning_rate, given.warmup_steps) == (3e-4, 5)
    assert note == "learning rate 0.0003 (training.learning_rate), warmup 5 steps (training.warmup_steps)"
    by_epochs, _ = TrainingConfig(epochs=2, max_steps=None, batch_size=10).resolved(128, False, train_sequences=95)
    assert by_epochs.warmup_steps == 2  # 10 % of 2 passes x 10 batches
    for bad in ("slow", -1, 1.5):
        with pytest.raises(UserError, match=rf"training\.warmup_steps: {bad!r} must be an integer >= 0 or 'auto'"):
            TrainingConfig(warmup_steps=bad)
    with pytest.raises(UserError, match=r"training\.warmup_steps: True must be a number, not true/false"):
        TrainingConfig(warmup_steps=True)


def test_the_loop_warms_up_for_auto_steps():
    model, ids, config, collator = setup(warmup_steps="auto", max_steps=20, learning_rate=1e-3)
    rates = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator).history["learning_rate"]
    assert rates.idxmax() == 1 and rates.iloc[0] == pytest.approx(5e-4)  # 2 warmup steps (10 % of 20), then decay


def test_training_on_the_memory_mapped_store_equals_training_on_arrays(tmp_path):
    """The same sequences, read from a token store through the index, train the same weights."""
    from bert_mlm.core.tokens.sequences import IndexedSequences, index_split
    from bert_mlm.core.tokens.token_store import TokenSplit, TokenStoreWriter

    sequences = repetitive_sequences()
    writer = TokenStoreWriter(tmp_path / "store", VOCAB, separator_id=3)
    documents = [s[1:-1] for s in sequences]
    split = TokenSplit.from_documents(documents, separator_id=3)
    writer.write_split("train", iter([(split.tokens, np.array([len(d) for d in documents]))]))
    for name in ("valid", "test"):
        writer.write_split(name, iter([]))
    writer.close({"vocabulary_digest": ""})
    from bert_mlm.core.tokens.token_store import TokenStore

    stored = TokenStore(tmp_path / "store").split("train")
    indexed = IndexedSequences(stored, index_split(stored, "document", 32), cls_id=2, sep_id=3)
    assert all(np.array_equal(indexed[i], sequences[i]) for i in range(len(sequences)))
    results = []
    for data in (sequences, indexed):
        model, ids, config, collator = setup(max_steps=6)
        train(model, data, ids, MaskingConfig(), config, collator)
        results.append(model.state_dict())
    assert all(torch.equal(results[0][k], results[1][k]) for k in results[0])


# ----------------------------------------------------------------------------- training.compile
@pytest.mark.slow  # inductor compiles C++ on CPU: minutes on a loaded 2-core machine
def test_a_compiled_encoder_trains_like_the_eager_one_without_recompiles(tmp_path):
    """12 steps of full batches of one width: the masked-position count varies every step, and it
    must not recompile the encoder (the head and the loss run outside the compiled graph)."""
    sequences = repetitive_sequences()
    eager, ids, config, collator = setup()
    eager_result = train(eager, sequences, ids, MaskingConfig(), config, collator)
    assert eager_result.history["masked_tokens"].nunique() > 1
    compiled, ids, config, collator = setup(compile=True)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(error_on_recompile=True):
        result = train(compiled, sequences, ids, MaskingConfig(), config, collator)
    assert compiled.bert._compiled_call_impl is not None  # it really ran compiled
    assert list(compiled.state_dict()) == list(eager.state_dict())  # no _orig_mod. keys
    for key, value in eager.state_dict().items():
        torch.testing.assert_close(compiled.state_dict()[key], value, rtol=1e-4, atol=1e-5, msg=key)
    assert np.allclose(result.history["loss"], eager_result.history["loss"], rtol=1e-4)
    compiled.save_pretrained(tmp_path / "saved")  # the plain transformers directory, loadable as such
    reloaded = type(compiled).from_pretrained(tmp_path / "saved")
    assert all(torch.equal(reloaded.state_dict()[k], v) for k, v in compiled.state_dict().items())


@pytest.mark.slow
def test_a_compiled_run_resumes_as_an_eager_one_would(tmp_path):
    """Checkpoints of a compiled run load into an eager run and the other way round; from the same
    checkpoint, a compiled and an eager resume reach the same weights."""
    sequences = repetitive_sequences()
    first = tmp_path / "first"
    model, ids, config, collator = setup(compile=True, max_steps=4, checkpoint_every=4, checkpoint_dir=str(first))
    train(model, sequences, ids, MaskingConfig(), config, collator)
    (checkpoint,) = list_checkpoints(run_folders(first)[-1])
    saved = read_checkpoint(checkpoint)["model"]
    assert sorted(saved) == sorted(model.state_dict()) and not any("_orig_mod" in key for key in saved)
    assert all(torch.equal(saved[key], value) for key, value in model.state_dict().items())
    resumed = {}
    for compile_setting in (True, False):
        directory = tmp_path / f"resume-{compile_setting}"
        shutil.copytree(first, directory)
        fresh, ids, config, collator = setup(compile=compile_setting, max_steps=8, checkpoint_every=4,
                                             checkpoint_dir=str(directory), resume=True)
        result = train(fresh, sequences, ids, MaskingConfig(), config, collator)
        assert result.resumed_from_step == 4
        resumed[compile_setting] = fresh.state_dict()
    for key, value in resumed[False].items():
        torch.testing.assert_close(resumed[True][key], value, rtol=1e-4, atol=1e-5, msg=key)


@pytest.mark.parametrize("value", ["fast", 1, "true"])
def test_compile_accepts_booleans_and_torch_modes_only(value):
    with pytest.raises(UserError, match=r"^training\.compile: "):
        TrainingConfig(compile=value)
    assert TrainingConfig(compile="max-autotune").compile == "max-autotune"


def test_a_collator_built_for_other_masking_is_refused():
    model, ids, config, collator = setup()
    with pytest.raises(ValueError, match=r"whole_word=False differs from the masking's need of words \(True\)"):
        train(model, repetitive_sequences(), ids, MaskingConfig(whole_word=True), config, collator)


# ----------------------------------------------------------------------------- validation during training
def validation_on(held_out: list[np.ndarray], budget: int = 150) -> Validation:
    """The fixed protocol on ``held_out``, stopped at ``budget`` masked tokens (as
    Experiment.validation builds it on the valid split). It also draws from the global RNG, as
    some evaluation might: training must not notice."""
    ids = setup()[1]
    evaluation_set = prepare_evaluation_set(held_out, Collator(0, SPECIAL, 32, "dynamic"), ids.mask, ids.replacement,
                                            EvaluationConfig(min_masked_tokens=budget, mask_draws=2))

    def evaluate_drawing(model):
        torch.rand(3)
        return score_sequences(model, evaluation_set, batch_size=16).summary()

    return evaluate_drawing


def weights_at_every_step(disturb: bool = False, **overrides):
    """Train a model with dropout (the global RNG matters) and keep its weights after every step;
    ``disturb``: draw from the global RNG after each step (outside any validation)."""
    model, ids, config, collator = setup(**overrides)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.1
    snapshots = []

    def keep(step, _record):
        assert model.training, f"step {step}: the model is not in train mode"
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        if disturb:
            torch.rand(3)

    validation = validation_on(repetitive_sequences(24, seed=1)) if config.eval_every else None
    result = train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator, keep, validation=validation)
    return snapshots, result, model


def test_validation_is_in_the_history_and_leaves_training_unchanged():
    plain, plain_result, _ = weights_at_every_step()
    validated, result, _ = weights_at_every_step(eval_every=5)
    for step, (a, b) in enumerate(zip(plain, validated, strict=True), 1):  # the same weights after every step
        assert all(torch.equal(a[k], b[k]) for k in a), step
    disturbed, _, _ = weights_at_every_step(disturb=True)  # the control: dropout does draw from that RNG
    assert not all(torch.equal(plain[-1][k], disturbed[-1][k]) for k in plain[-1])
    history = result.history
    assert "valid_loss" not in plain_result.history
    rows = history.dropna(subset=["valid_loss"])
    assert list(rows["step"]) == [5, 10, 12]  # every 5 steps and the last
    assert (rows["valid_masked_tokens"] >= 150).all() and rows["valid_masked_tokens"].nunique() == 1  # fixed masks
    assert rows["valid_loss"].nunique() == 3 and (rows["valid_accuracy"].between(0, 1)).all()
    assert (rows["valid_seconds"] > 0).all() and (rows["valid_loss_se"] > 0).all()
    assert result.kept_step is None  # keep_best is off: the last step's weights
    plain_columns = [c for c in plain_result.history if c not in ("seconds", "tokens_per_second")]
    pd.testing.assert_frame_equal(history[plain_columns], plain_result.history[plain_columns])


def test_keep_best_ends_with_the_weights_of_the_lowest_validation_loss():
    # Validated on other patterns than it trains on: the model learns its own and the held-out
    # loss, lowest early, rises.
    snapshots, result, model = weights_at_every_step(eval_every=2, keep_best=True, learning_rate=1e-2,
                                                     schedule="constant_with_warmup")
    rows = result.history.dropna(subset=["valid_loss"])
    best = int(rows.loc[rows["valid_loss"].idxmin(), "step"])
    assert best < 12 and result.kept_step == best  # an earlier step than the last
    assert result.kept_valid_loss == pytest.approx(rows["valid_loss"].min())
    kept = model.state_dict()
    assert all(torch.equal(kept[k], snapshots[best - 1][k]) for k in kept)
    assert not all(torch.equal(kept[k], snapshots[-1][k]) for k in kept)


def test_validation_needs_its_set():
    model, ids, config, collator = setup(eval_every=3)
    with pytest.raises(ValueError, match="training.eval_every is set but no validation was given"):
        train(model, repetitive_sequences(), ids, MaskingConfig(), config, collator)


@pytest.mark.parametrize(("steps", "every", "count"), [(30, 15, 2), (30, 7, 5), (4, 2, 2), (5, 10, 1), (5, 0, 0)])
def test_a_run_validates_every_eval_every_steps_and_at_its_end(steps, every, count):
    due = [step for step in range(1, steps + 1) if validation_due(step, steps, every)]
    assert len(due) == validation_count(steps, every) == count  # the plan counts what the loop does
    assert validation_count(10**21, 7) == 10**21 // 7 + 1  # a budget the plan refuses is counted, not enumerated
