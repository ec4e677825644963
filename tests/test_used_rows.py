"""Fine-tuning trains only the embedding rows its inputs use (hyperparameters.embedding_rows: used): the same model
as dense training (all) where dense training changes anything but weight decay, untouched rows elsewhere, the full
vocabulary for inference during and after training, dense training where the embedding is shared."""

import dataclasses
import random

import pytest
import torch
import transformers
from conftest import WORDS

from metaxlm.data.examples import ClassificationExample
from metaxlm.finetune.inference import predict_outputs
from metaxlm.finetune.models import load_model
from metaxlm.finetune.spec import Hyperparameters
from metaxlm.finetune.tasks import get_task
from metaxlm.finetune.trainer import finetune
from metaxlm.finetune.used_rows import UsedRows, compactable

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir):
    return tiny_bert_dir  # tests/conftest.py


def examples(langs, n: int, seed: int = 0) -> list[ClassificationExample]:
    rng = random.Random(seed)
    return [ClassificationExample(f"x{i}", " ".join(rng.choices(WORDS[lang], k=5)), lang)
            for i in range(n) for lang in [langs[i % len(langs)]]]


def trained(tokenizer, model_dir, rows: str, train, test, on_step=None, **kw):
    hp = Hyperparameters(lr=3e-3, batch_size=4, max_steps=12, max_seq_len=32, warmup_ratio=0.0,
                         embedding_rows=rows, **kw)
    task = get_task("classification")(tokenizer, hp)
    task.fit_labels(train)
    transformers.set_seed(1)
    model = load_model(task, model_dir)
    start = model.get_input_embeddings().weight.detach().clone()
    finetune(model, task, train, hp, seed=1, progress=False, on_step=on_step)
    outputs = predict_outputs(model, task, task.encode(test, train=False), hp)
    return model, start, torch.tensor([list(o[0]) for o in outputs]), task


def used_ids(task, train) -> list[int]:
    return sorted({i for f in task.encode(train, train=True) for i in f["input_ids"]} | {task.tokenizer.pad_token_id})


def test_without_weight_decay_it_trains_the_same_model_as_dense_training(tokenizer, model_dir):
    train, test = examples(["en", "de"], 16), examples(["ru", "en"], 8, seed=5)  # test words never trained
    dense, _, dense_out, _ = trained(tokenizer, model_dir, "all", train, test, weight_decay=0.0)
    used, _, used_out, _ = trained(tokenizer, model_dir, "used", train, test, weight_decay=0.0)
    for (name, a), (_, b) in zip(dense.state_dict().items(), used.state_dict().items(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name
    assert torch.allclose(dense_out, used_out, atol=1e-5)
    assert type(used.get_input_embeddings()) is torch.nn.Embedding  # the full matrix is back after training


def test_with_weight_decay_only_the_untouched_rows_differ(tokenizer, model_dir):
    """Dense AdamW shrinks every row by its decoupled weight decay; `used` leaves rows no input reads as they were
    and trains the others exactly as dense training does."""
    train, test = examples(["en", "de"], 16), examples(["ru"], 6, seed=5)
    dense, start, _, task = trained(tokenizer, model_dir, "all", train, test, weight_decay=0.1)
    used, _, _, _ = trained(tokenizer, model_dir, "used", train, test, weight_decay=0.1)
    rows = torch.tensor(used_ids(task, train))
    unused = torch.ones(start.shape[0], dtype=torch.bool)
    unused[rows] = False
    e_dense, e_used = dense.get_input_embeddings().weight, used.get_input_embeddings().weight
    assert torch.allclose(e_dense[rows], e_used[rows], atol=1e-6)
    assert torch.equal(e_used[unused], start[unused])
    shrink = torch.prod(torch.tensor([1 - 3e-3 * (1 - t / 12) * 0.1 for t in range(12)]))  # linear lr decay
    assert torch.allclose(e_dense[unused], start[unused] * shrink, atol=1e-6)
    assert not torch.allclose(e_dense[unused], start[unused], atol=1e-7)


def test_inference_during_training_reads_the_full_vocabulary(tokenizer, model_dir):
    """An evaluation during training (eval_steps) reads rows outside the training data: it gets the full matrix
    with the rows trained so far, and training goes on with the compact one."""
    # English words only (the test's rows lie outside them), of two labels (a classifier of one is refused)
    train = [dataclasses.replace(ex, label="ab"[i % 2]) for i, ex in enumerate(examples(["en"], 12))]
    test = examples(["ru", "de"], 6, seed=7)
    seen = []

    def on_step(step, total):
        embedding = model_holder[0].get_input_embeddings()
        seen.append((type(embedding).__name__, embedding.weight.shape[0]))

    model_holder = []
    hp = Hyperparameters(lr=3e-3, batch_size=4, max_steps=3, max_seq_len=32, warmup_ratio=0.0)
    task = get_task("classification")(tokenizer, hp)
    task.fit_labels(train)
    model = load_model(task, model_dir)
    model_holder.append(model)
    finetune(model, task, train, hp, seed=0, progress=False,
             on_step=lambda step, total: (on_step(step, total),
                                          predict_outputs(model, task, task.encode(test, train=False), hp)))
    assert seen == [("Embedding", len(tokenizer))] * 3


def test_a_shared_or_encoder_decoder_embedding_trains_densely(tokenizer, model_dir):
    mlm = transformers.BertForMaskedLM.from_pretrained(model_dir)  # output layer tied to the input embedding
    assert not compactable(mlm)
    with UsedRows(mlm, [1, 2, 3]) as used:
        assert not used.active and mlm.get_input_embeddings().weight.shape[0] == len(tokenizer)
    classifier = transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=2)
    assert compactable(classifier)
    with UsedRows(classifier, [0, 5, 9]):
        assert classifier.get_input_embeddings().weight.shape[0] == 3
        with pytest.raises(Exception, match="outside the fine-tuning data"):
            classifier(input_ids=torch.tensor([[0, 6]]))
    assert classifier.get_input_embeddings().weight.shape[0] == len(tokenizer)
