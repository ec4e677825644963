import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertModel, BertTokenizerFast

from metaxlm.data.examples import AlignmentSet
from metaxlm.errors import ConfigError, DataError
from metaxlm.evaluation.metrics import alignment_scores
from metaxlm.features.alignment import WordAligner, align_file, alignment_by_layer
from metaxlm.features.links import argmax_links, itermax_links, ot_links, sinkhorn
from metaxlm.features.subwords import word_pieces

SRC = [s.split() for s in ["das Haus ist klein", "die Katze schläft auf dem roten Stuhl", "房子很小", "das Haus"]]
TGT = [s.split() for s in ["the house is small", "the cat sleeps on the red chair", "the house is small", "das Haus"]]


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def tiny_bert(tokenizer, positions=64) -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=positions,
                                pad_token_id=tokenizer.pad_token_id)).eval()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_bert(tokenizer)


def padded(matrices: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """A padded batch (garbage in the padding, which the mask must hide) and its mask."""
    m, n = max(x.shape[0] for x in matrices), max(x.shape[1] for x in matrices)
    sim = torch.full((len(matrices), m, n), 5.0, dtype=matrices[0].dtype)
    mask = torch.zeros((len(matrices), m, n), dtype=torch.bool)
    for b, x in enumerate(matrices):
        sim[b, :x.shape[0], :x.shape[1]] = x
        mask[b, :x.shape[0], :x.shape[1]] = True
    return sim, mask


def random_similarities(seed: int, sizes=((3, 5), (7, 4), (6, 6), (1, 3), (2, 9))) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(m, n, generator=gen, dtype=torch.float64) * 2 - 1 for m, n in sizes]


# --- links from similarity matrices ---------------------------------------------------------------------

@pytest.mark.parametrize(("eps", "n_iter"), [(0.05, 1), (0.1, 2), (0.3, 5), (1.0, 50)])
def test_sinkhorn_matches_pot_on_random_padded_batches(eps, n_iter):
    ot = pytest.importorskip("ot")
    matrices = random_similarities(seed=int(eps * 100) + n_iter)
    sim, mask = padded(matrices)
    plan = sinkhorn(sim, eps, n_iter, mask)
    assert (plan[~mask] == 0).all()
    for b, x in enumerate(matrices):
        m, n = x.shape
        want = ot.sinkhorn(ot.unif(m), ot.unif(n), -x.numpy(), eps, numItermax=n_iter, stopThr=0.0, warn=False)
        np.testing.assert_allclose(plan[b, :m, :n].numpy(), want, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(sinkhorn(x.float(), eps, n_iter).numpy(), want, rtol=2e-4, atol=1e-8)  # fp32


def test_sinkhorn_small_eps_does_not_overflow():
    plan = sinkhorn(random_similarities(seed=1)[2].float(), eps=0.001, n_iter=3)
    assert torch.isfinite(plan).all() and plan.sum().item() == pytest.approx(1.0, rel=1e-4)


def test_argmax_and_itermax_by_hand():
    cos = torch.tensor([[0.9, 0.1, 0.0],
                        [0.8, 0.2, 0.1],
                        [0.0, 0.3, 0.7]])
    # rows pick columns 0, 0, 2; columns pick rows 0, 2, 2: the intersection is (0,0) and (2,2)
    assert argmax_links(cos).nonzero().tolist() == [[0, 0], [2, 2]]
    # itermax round 2 on (cos+1)/2: row 1 is free; × α on cells with one aligned side, × 0 with both:
    # row 1 -> [.81, .60, .495] picks column 0; column 0 -> [0, .81, 0] picks row 1: (1,0) is added
    assert itermax_links(cos).nonzero().tolist() == [[0, 0], [1, 0], [2, 2]]
    assert itermax_links(cos, max_count=1).nonzero().tolist() == [[0, 0], [2, 2]]
    assert itermax_links(cos[:2, :2]).nonzero().tolist() == [[0, 0]]  # ≤ 2 words on a side: one round only


def reference_filtering(score: np.ndarray, alpha: float, max_count: int) -> set[tuple[int, int]]:
    """Iterative argmax filtering of one non-negative score matrix, written plainly with loops."""
    m, n = score.shape

    def mutual(s):
        return {(i, int(s[i].argmax())) for i in range(m) if int(s[:, int(s[i].argmax())].argmax()) == i}

    links = mutual(score)
    for _ in range(max_count - 1):
        rows, cols = {i for i, _ in links}, {j for _, j in links}
        if min(m, n) <= 2 or len(rows) == m or len(cols) == n:
            break
        weight = np.array([[min(1.0, alpha * (i not in rows) + alpha * (j not in cols)) for j in range(n)]
                           for i in range(m)])
        links |= {(i, j) for i, j in mutual(score * weight) if i not in rows or j not in cols}
    return links


@pytest.mark.parametrize("max_count", [1, 2, 3])
def test_batched_itermax_and_ot_match_a_plain_reference(max_count):
    ot = pytest.importorskip("ot")
    # no 1 x n matrix: its plan is the uniform target marginal, all ties
    matrices = random_similarities(seed=10 + max_count, sizes=((3, 5), (7, 4), (6, 6), (2, 3), (5, 8), (9, 9)))
    sim, mask = padded(matrices)
    itermax = itermax_links(sim, mask, alpha=0.7, max_count=max_count)
    via_ot = ot_links(sim, mask, eps=0.2, n_iter=2, alpha=0.7, max_count=max_count)
    for b, x in enumerate(matrices):
        m, n = x.shape
        assert not itermax[b, m:].any() and not itermax[b, :, n:].any()
        got = {tuple(ij) for ij in itermax[b].nonzero().tolist()}
        assert got == reference_filtering(((x + 1) / 2).numpy(), 0.7, max_count)
        plan = ot.sinkhorn(ot.unif(m), ot.unif(n), -x.numpy(), 0.2, numItermax=2, stopThr=0.0, warn=False)
        assert {tuple(ij) for ij in via_ot[b].nonzero().tolist()} == reference_filtering(plan, 0.7, max_count)


# --- sub-words -> words ----------------------------------------------------------------------------------

def test_word_pieces_sentencepiece_drops_bare_pieces_and_specials(tokenizer):
    words = "das Haus ist klein 房子很小 кошка спит".split()
    [pieces] = word_pieces(tokenizer, [words], limit=512)
    tokens = tokenizer.convert_ids_to_tokens(pieces.rows[0])
    start, end = pieces.spans[0]
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and (start, end) == (1, len(tokens) - 1)
    sentence = tokens[start:end]
    assert "▁" in sentence  # the tokenizer does emit a bare piece here (before 房...)
    kept = [sentence[p] for p in pieces.keep]
    assert "▁" not in kept and len(kept) == len(sentence) - sentence.count("▁")
    for w, word in enumerate(words):  # the kept pieces of each word spell it
        assert "".join(t for t, k in zip(kept, pieces.words, strict=True) if k == w).lstrip("▁") == word


def test_word_pieces_wordpiece():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "house", "##s", "kit", "##ty", "sleep", "##ing",
             ",", "."]
    tokenizer = BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)})
    [pieces, empty] = word_pieces(tokenizer, [["the", "houses", ",", "kitty", "sleeping", "."], []], limit=512)
    assert tokenizer.convert_ids_to_tokens(pieces.rows[0]) == ["[CLS]", "the", "house", "##s", ",", "kit", "##ty",
                                                               "sleep", "##ing", ".", "[SEP]"]
    assert pieces.keep == list(range(9)) and pieces.words == [0, 1, 1, 2, 3, 3, 4, 4, 5]
    assert empty.rows == [] and empty.words == []


# --- the aligner ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["argmax", "itermax"])
def test_identical_sentences_align_on_the_diagonal(model, tokenizer, method):
    sentences = SRC[:3]
    gold = [{(i, i) for i in range(len(s))} for s in sentences]
    result = alignment_by_layer(model, tokenizer, AlignmentSet(sentences, sentences, gold, gold), method=method,
                                precision="fp32")
    assert result["layers"] == [0, 1, 2, 3]
    assert result["aer"] == [0.0] * 4 and result["f1"] == [1.0] * 4


def test_all_layers_from_one_pass_equal_single_layer_runs_and_each_sentence_is_encoded_once(model, tokenizer):
    aligner = WordAligner(model, tokenizer, method="ot", precision="fp32", batch_size=2, pair_batch_size=2)
    rows = []
    handle = model.embeddings.register_forward_hook(lambda _m, args, out: rows.append(out.shape[0]))
    try:
        together = aligner.align_layers(SRC, TGT, [1, 3])
    finally:
        handle.remove()
    assert sum(rows) == len({tuple(s) for s in SRC + TGT}) == 6  # of 8 sentences: two repeat
    for layer in (1, 3):
        assert together[layer] == aligner.align(SRC, TGT, layer=layer)
    assert all(0 <= i < len(s) and 0 <= j < len(t) for links, s, t in zip(together[3], SRC, TGT, strict=True)
               for i, j in links)
    assert together[3][3] == {(0, 0), (1, 1)}  # identical pair


def test_alignment_by_layer_scores_with_the_shared_metric(model, tokenizer):
    sure = [{(0, 0), (1, 1)}, {(0, 0), (1, 1), (2, 2)}, {(0, 1)}, {(0, 0), (1, 1)}]
    possible = [s | {(2, 3)} for s in sure]
    aset = AlignmentSet(SRC, TGT, sure, possible)
    result = alignment_by_layer(model, tokenizer, aset, method="ot", layers=[2], eps=0.5, n_iter=3)
    pred = WordAligner(model, tokenizer, method="ot", eps=0.5, n_iter=3).align(SRC, TGT, layer=2)
    want = alignment_scores(pred, sure, possible)
    assert result == {"layers": [2], **{k: [v] for k, v in want.items()}}


def test_long_sentences_are_chunked_with_a_warning_never_an_index_error(tokenizer):
    model = tiny_bert(tokenizer, positions=16)
    long = ("das Haus ist klein und die Katze schläft auf dem roten Stuhl am offenen Fenster " * 3).split()
    aligner = WordAligner(model, tokenizer, method="argmax", precision="fp32")
    with pytest.warns(UserWarning, match="longer than the model's 16 positions"):
        [links] = aligner.align([long], [long])
    assert {(i, i) for i in range(len(long))} <= links  # words past position 16 are aligned too


def test_aligner_settings_are_checked(model, tokenizer):
    with pytest.raises(ConfigError, match="method"):
        WordAligner(model, tokenizer, method="grow-diag")
    with pytest.raises(ConfigError, match="eps"):
        WordAligner(model, tokenizer, eps=0.0)
    with pytest.raises(ConfigError, match="0..3"):
        WordAligner(model, tokenizer, layer=7)
    assert WordAligner(model, tokenizer).layer == 2  # 7/12 of the depth, rounded


# --- align_file ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_dir(model, tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("aligner-model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_align_file_writes_pharaoh_lines(model_dir, model, tokenizer, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("".join(f"{' '.join(s)} ||| {' '.join(t)}\n" for s, t in zip(SRC, TGT, strict=True))
                     + "das Haus |||\n", encoding="utf-8")
    out = tmp_path / "out" / "links.txt"
    assert align_file(model_dir, pairs, None, out, layer=2, method="itermax", progress=False) == 5
    want = WordAligner(model, tokenizer, method="itermax").align(SRC, TGT, layer=2)
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-2:] == ["", ""]  # the pair with an empty side has no links
    assert [{tuple(map(int, link.split("-"))) for link in line.split()} for line in lines[:4]] == want
    # two line-aligned files give the same output
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(" ".join(s) + "\n" for s in SRC), encoding="utf-8")
    tgt.write_text("".join(" ".join(t) + "\n" for t in TGT), encoding="utf-8")
    out2 = tmp_path / "links2.txt"
    align_file(model_dir, src, tgt, out2, layer=2, method="itermax", progress=False, block_size=3)
    assert out2.read_text(encoding="utf-8").split("\n")[:4] == lines[:4]


def test_align_file_bad_input_names_file_and_line_and_writes_nothing(model_dir, tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("das Haus ||| the house\nno separator here\n", encoding="utf-8")
    out = tmp_path / "links.txt"
    with pytest.raises(DataError, match=r"pairs.txt:2: expected 'source \|\|\| target'"):
        align_file(model_dir, pairs, None, out, progress=False)
    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("a b\nc d\ne\n", encoding="utf-8")
    tgt.write_text("a b\nc d\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"b.txt:2: file ends here"):
        align_file(model_dir, src, tgt, out, progress=False)
    assert sorted(tmp_path.iterdir()) == sorted([pairs, src, tgt])  # no output, no temporary file
