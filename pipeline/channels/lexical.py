"""Field-weighted BM25 as sparse matrices: all queries of a scope scored in one sparse product.

Tokenisation is bm25s's (stopwords, optional stemmer) with a script-aware word splitter
(``pipeline.ops.tokenize``: English, per Han character, jieba, or ``auto`` by script). Scoring
follows bm25s's ``lucene`` variant (``idf = ln(1 + (N − df + 0.5)/(df + 0.5))``,
``tf/(tf + k1·(1 − b + b·|d|/avgdl))``) with the field weighting of OKS/FTS5:
``tf = Σ_field w_field·tf_field`` while ``|d|`` counts the tokens of all fields. With only a body
field of weight 1 this equals bm25s exactly (tests check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.channels.segvocab import Layout, remap, token_keys
from pipeline.contract.errors import ConfigError
from pipeline.ops.tokenize import ascii_pattern, fts5_query, has_cjk, splitter
from pipeline.ops.topk import int_order, topk_sparse

FIELDS = ("title", "tags", "body", "code")


@dataclass
class Tokens:
    """Per-field sparse term counts over a shared vocabulary: each (n_docs, V) float32 CSR."""

    fields: dict[str, sp.csr_matrix]
    vocab: dict[str, int]
    places: tuple | None = None  # segvocab.token_keys: where each document's tokens sit


def make_tokenizer(
    stopwords: str | None = "en",
    stemmer: str | None = None,
    tokenizer: str = "auto",
    cjk_bigrams: bool = False,
    cjk_min_len: int = 1,
):
    """A bm25s Tokenizer with the chosen splitter (``tokenizer``), stopword lists and optional PyStemmer stemmer."""
    from bm25s.tokenization import Tokenizer

    stem = None
    if stemmer and stemmer != "none":
        try:
            import Stemmer
        except ImportError:
            raise ConfigError("lexical.stemmer needs PyStemmer: pip install PyStemmer") from None
        stem = Stemmer.Stemmer(stemmer)  # bm25s calls its stemWord per token
    tok = Tokenizer(
        lower=tokenizer not in ("fts5", "reme"),  # fts5: OKS's jieba sees the text as written;
        # unicode61 folds. reme: ReMe lower-cases each word after splitting
        splitter=splitter(tokenizer, cjk_bigrams, cjk_min_len),
        stopwords=stopword_list(stopwords),
        stemmer=stem,
    )
    tok.query_splitter = fts5_query if tokenizer == "fts5" else tok.splitter  # OKS's MATCH string
    return tok


def _bundled_stopwords(name: str) -> list[str]:
    """A stopword list shipped in ``pipeline/resources/stopwords`` (``reme``: ReMe's own 1,395,
    lower-cased and stripped as ReMe's ``base_tokenizer`` reads them)."""
    path = Path(__file__).resolve().parents[1] / "resources" / "stopwords" / f"{name}.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(w.strip().lower() for w in lines if w.strip()))


def stopword_list(names: str | None) -> list[str]:
    """bm25s's stopword lists by name, several joined with ``+`` (``en+zh``: English and Chinese),
    or ``reme`` (ReMe's list, bundled)."""
    from bm25s.tokenization import _infer_stopwords

    out: dict[str, None] = {}
    for name in names.split("+") if names and names != "none" else []:
        if name == "reme":
            out |= dict.fromkeys(_bundled_stopwords(name))
            continue
        try:
            out |= dict.fromkeys(_infer_stopwords(name))
        except ValueError:
            raise ConfigError(
                f"lexical.stopwords={names!r}: no stopword list {name!r}; "
                "use e.g. en, zh, en+zh, reme or null"
            ) from None
    return list(out)


def term_ids(
    tokenizer, texts: list[str], update: bool = True, split=None
) -> tuple[np.ndarray, np.ndarray]:
    """bm25s's ``tokenizer.tokenize(texts, update_vocab=update, return_as="ids")`` as flat arrays
    (each text's number of ids, and the ids end to end), with the tokenizer's vocabulary updated
    exactly as bm25s updates it. bm25s decides a word's id at its first occurrence, so deciding
    once per distinct word, in order of first occurrence, gives the same ids (tests check parity).
    Without ``update`` a word whose stem is not in the vocabulary is dropped. ``split``: another
    word splitter (the queries' one, ``make_tokenizer``)."""
    flat, lens_in = _words(split or tokenizer.splitter, texts, tokenizer.lower)
    w2id, stem, stems = tokenizer.word_to_id, tokenizer.stemmer, tokenizer.stem_to_sid
    if update and "" not in w2id:  # bm25s's empty-text token
        w2id[""] = max(w2id.values(), default=-1) + 1
        if stem is not None:
            tokenizer.word_to_stem.setdefault("", "")
            stems.setdefault("", w2id[""])
    stop = set(tokenizer.stopwords) if tokenizer.stopwords is not None else set()
    ids: dict[str, int] = {}
    for w in dict.fromkeys(flat) if isinstance(flat, list) else flat.unique(maintain_order=True):
        if w in w2id:
            ids[w] = w2id[w]
        elif w in stop or (stem is None and not update):
            ids[w] = -1
        elif stem is None:
            ids[w] = w2id[w] = len(w2id)
        else:
            s = tokenizer.word_to_stem.get(w)
            if s is None:
                s = tokenizer.word_to_stem[w] = stem(w)
            if s not in stems and not update:
                ids[w] = -1
                continue
            if s not in stems:
                stems[s] = len(stems)
            ids[w] = w2id[w] = stems[s]
    if isinstance(flat, list):
        term = np.fromiter(map(ids.__getitem__, flat), np.int64, count=len(flat))
    else:
        term = flat.replace_strict(list(ids), list(ids.values()), return_dtype=pl.Int64).to_numpy()
    doc = np.repeat(np.arange(len(texts)), lens_in)
    keep = term >= 0
    lens = np.bincount(doc[keep], minlength=len(texts))
    if (lens == 0).any() and "" in w2id:  # nothing kept: bm25s gives the empty-text token
        term = np.concatenate([term[keep], np.full(int((lens == 0).sum()), w2id[""], np.int64)])
        doc = np.concatenate([doc[keep], np.flatnonzero(lens == 0)])
        term = term[int_order(doc)]
        lens = np.maximum(lens, 1)
    else:
        term = term[keep]
    return lens, term


def _words(split, texts: list[str], lower: bool) -> tuple:
    """Every text's words end to end (a text without any: the one word ""), and the number per
    text: a list from ``split`` per text, or, when every text is ASCII and ``split`` applies one
    regex to such text (``tokenize.ascii_pattern``), a polars Series from one vectorised
    ``extract_all`` (the same words: the pattern's ``\\w`` is ``[0-9A-Za-z_]`` on ASCII in both
    regex engines)."""
    pattern = ascii_pattern(split)
    if pattern is None or not texts or not all(map(str.isascii, texts)):
        words = [list(split(t.lower() if lower else t)) or [""] for t in texts]
        lens = np.fromiter(map(len, words), np.int64, len(words))
        return list(chain.from_iterable(words)), lens
    col = pl.Series(texts, dtype=pl.String)
    got = (col.str.to_lowercase() if lower else col).str.extract_all(pattern)
    lens = np.maximum(got.list.len().to_numpy().astype(np.int64), 1)
    return got.explode(empty_as_null=True).fill_null(""), lens


def _field_ids(tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document, position, term) of every token of ``texts``, the vocabulary growing in order of
    first appearance. Each distinct non-empty text is tokenised once, in order of first occurrence
    (a repeat adds no term, so the ids are those of tokenising every text); empty texts (most
    nodes' tags and code) hold none. The distinct texts and each text's place among them are found
    by polars (a hash of each text), not by a Python walk over the texts."""
    col = pl.Series(texts, dtype=pl.String).fill_null("")
    distinct = col.filter(col != "").unique(maintain_order=True)
    if not len(distinct):
        z = np.zeros(0, np.int64)
        return z, z, z
    lens_u, term_u = term_ids(tokenizer, distinct.to_list())
    which = col.replace_strict(
        distinct, np.arange(len(distinct), dtype=np.int64), default=-1, return_dtype=pl.Int64
    ).to_numpy()
    lens = np.where(which >= 0, lens_u[np.maximum(which, 0)], 0)
    doc, pos = _doc_pos(lens)
    start_u = np.cumsum(lens_u) - lens_u
    return doc, pos, term_u[start_u[which[doc]] + pos]


def _doc_pos(lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Document and position within it of each of ``lens.sum()`` tokens laid end to end."""
    doc = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
    return doc, np.arange(len(doc), dtype=np.int64) - (np.cumsum(lens) - lens)[doc]


def _first_of_each(doc: np.ndarray, term: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mask of the tokens to keep when the documents flagged in ``rows`` count each term once
    (its first occurrence)."""
    keep = np.ones(len(doc), bool)
    flagged = rows[doc]
    if flagged.any():
        key = doc[flagged] * (int(term.max()) + 1) + term[flagged]
        first = np.zeros(int(flagged.sum()), bool)
        first[np.unique(key, return_index=True)[1]] = True
        keep[flagged] = first
    return keep


def tokenize_fields(tokenizer, fields: dict[str, list[str]], cjk_set: bool = False) -> Tokens:
    """Tokenise each field's texts into one growing vocabulary. ``cjk_set`` (OKS): a text holding
    Han characters counts each of its terms once (tf = 1, |d| = distinct terms)."""
    ids = {name: _field_ids(tokenizer, texts) for name, texts in fields.items()}
    vocab = dict(tokenizer.get_vocab_dict())
    empty = vocab.get("")
    out, flat = {}, {}
    for name, (doc, pos, term) in ids.items():
        n_rows = len(fields[name])
        if cjk_set:
            cjk = np.fromiter(map(has_cjk, fields[name]), bool, n_rows)
            keep = _first_of_each(doc, term, cjk)
            doc, term = doc[keep], term[keep]
            pos = _doc_pos(np.bincount(doc, minlength=n_rows))[1]
        if empty is not None:  # bm25s's "" token is not a term
            keep = term != empty
            doc, pos, term = doc[keep], pos[keep], term[keep]
        m = sp.csr_matrix((np.ones(len(term), np.float32), (doc, term)), shape=(n_rows, len(vocab)))
        m.sum_duplicates()
        out[name], flat[name] = m, (doc, pos, term)
    return Tokens(out, vocab, token_keys(flat))


def tokenize_queries(
    tokenizer, texts: list[str], vocab: dict[str, int], dedupe: bool = False, cjk_set: bool = False
) -> sp.csr_matrix:
    """(nq, V) query term counts; out-of-vocabulary terms are dropped. ``dedupe`` counts each term of
    a query once; ``cjk_set`` does so for queries holding Han characters."""
    lens, term = term_ids(
        tokenizer, texts, update=False, split=getattr(tokenizer, "query_splitter", None)
    )
    doc, _pos = _doc_pos(lens)
    if dedupe or cjk_set:
        once = np.fromiter((dedupe or has_cjk(t) for t in texts), bool, len(texts))
        keep = _first_of_each(doc, term, once)
        doc, term = doc[keep], term[keep]
    if "" in vocab:  # bm25s's empty-text token is not a term
        keep = term != vocab[""]
        doc, term = doc[keep], term[keep]
    m = sp.csr_matrix((np.ones(len(term), np.float32), (doc, term)), shape=(len(texts), len(vocab)))
    m.sum_duplicates()
    return m


def bm25_matrix(
    tokens: Tokens,
    weights: dict[str, float],
    rows: np.ndarray | None = None,
    k1: float = 1.5,
    b: float = 0.75,
    idf: str = "lucene",
    seg: np.ndarray | None = None,
    lay: Layout | None = None,
) -> sp.csr_matrix:
    """(n_docs, V) BM25 term scores for the documents ``rows`` (all when None); IDF over those rows.
    With ``seg`` (segment of each of ``rows``, contiguous) and its ``lay`` (``segvocab.layout``):
    each segment's documents in its own columns, with its own N, average length and df, so the
    block of a segment equals the matrix of that segment alone.

    ``idf="lucene"``: ln(1 + (N − df + 0.5)/(df + 0.5)), tf/(tf + k1·norm) (bm25s default);
    ``idf="reme"``: the same idf, tf·(k1+1)/(tf + k1·norm) (ReMe's ``bm25_index.py``);
    ``idf="fts5"``: SQLite FTS5 (OKS): ln((N − df + 0.5)/(df + 0.5)) floored at 1e-6, tf·(k1+1)/(tf + k1·norm).
    """
    if idf not in ("lucene", "reme", "fts5"):
        raise ConfigError(f"lexical.idf={idf!r}; choose from ['fts5', 'lucene', 'reme']")
    unknown = set(weights) - set(FIELDS)
    if unknown:
        raise ConfigError(
            f"lexical.field_weights has unknown fields {sorted(unknown)}; choose from {list(FIELDS)}"
        )
    mats = {f: (m if rows is None else m[rows]) for f, m in tokens.fields.items()}
    if lay is not None:
        mats = {f: remap(m, seg, lay) for f, m in mats.items()}
    n = next(iter(mats.values())).shape[0]
    tf = sum(
        (float(weights.get(f, 0.0)) * m for f, m in mats.items() if weights.get(f, 0.0)),
        start=sp.csr_matrix(next(iter(mats.values())).shape, dtype=np.float32),
    ).tocsr()
    length = np.asarray(sum(m for f, m in mats.items() if weights.get(f, 0.0)).sum(axis=1)).ravel()
    n, avgdl = _segment_stats(length, seg, lay, n)
    df = np.bincount(tf.indices, minlength=tf.shape[1]).astype(np.float64)
    if idf in ("lucene", "reme"):  # ReMe's bm25_index keeps the (k1 + 1) factor bm25s drops
        w_idf, top = np.log1p((n - df + 0.5) / (df + 0.5)), (k1 + 1.0 if idf == "reme" else 1.0)
    else:
        w_idf, top = np.log(np.maximum((n - df + 0.5) / (df + 0.5), 1e-300)), k1 + 1.0
        w_idf = np.where(w_idf <= 0, 1e-6, w_idf)
    norm = k1 * (1.0 - b + b * length / avgdl)
    out = tf.copy().astype(np.float32)
    row_of = np.repeat(np.arange(out.shape[0]), np.diff(out.indptr))
    out.data = (w_idf[out.indices] * out.data * top / (out.data + norm[row_of])).astype(np.float32)
    return out


def _segment_stats(length: np.ndarray, seg, lay, n: int) -> tuple:
    """(N, average length): plain numbers for one set of documents; with segments, N per column
    and the average length (float32, as the plain number enters float32 arithmetic) per row, each
    computed exactly as for that segment alone."""
    if lay is None:
        return n, max(float(length.mean()) if n else 0.0, 1e-9)
    cut = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1], True]) if n else np.zeros(1, np.int64)
    sizes = np.diff(cut)
    means = [max(float(length[a:z].mean()), 1e-9) for a, z in zip(cut[:-1], cut[1:])]
    per_col = np.bincount(lay.codes // lay.n_terms, minlength=int(seg.max(initial=-1)) + 1)
    col_n = np.repeat(np.bincount(seg, minlength=len(per_col)), per_col)
    return col_n, np.repeat(np.asarray(means, np.float32), sizes)


def score(q: sp.csr_matrix, s: sp.csr_matrix) -> sp.csr_matrix:
    """(nq, V) query counts × (n_docs, V) term scores → (nq, n_docs) sparse BM25 scores."""
    return (q @ s.T).tocsr()


SCORE_ROWS = 1024  # query rows per block of :func:`top_scores`
SCORE_ENTRIES = 1 << 21  # most scores per block of :func:`top_scores` (bounded by the df sums)


def top_scores(
    q: sp.csr_matrix, s: sp.csr_matrix, k: int, st: sp.csr_matrix | None = None
) -> tuple[np.ndarray, ...]:
    """``topk_sparse(score(q, s), k)``, in blocks of consecutive query rows (:func:`score_blocks`).
    scipy's product sums each row on its own (its query's terms in order), so a block's rows are
    the whole product's; a block's arrays stay small enough to be reused by the allocator instead
    of paging in fresh memory (on millions of scores that costs more than the arithmetic).
    ``st``: ``s.T.tocsr()`` computed earlier (a caller scoring several query groups keeps it)."""
    st = s.T.tocsr() if st is None else st  # what ``q @ s.T`` converts it to, once
    out = [topk_sparse(q[:0] @ st, k)]
    for a, b in score_blocks(q, st):
        qi, di, sc, rank = topk_sparse((q[a:b] @ st).tocsr(), k)
        out.append((qi + a, di, sc, rank))
    return tuple(np.concatenate(x) for x in zip(*out))


def score_blocks(q: sp.csr_matrix, st: sp.csr_matrix) -> list[tuple[int, int]]:
    """Consecutive (start, end) blocks of ``q``'s rows: at most ``SCORE_ROWS`` rows, and at most
    ``SCORE_ENTRIES`` scores by the bound of each row (the sum of its terms' document counts, the
    row counts of ``st``) unless one row alone exceeds it."""
    q = q.tocsr()
    per = np.diff(st.indptr).astype(np.int64)[q.indices]
    total = np.r_[0, np.cumsum(per)][q.indptr]  # bound of rows < i, for i = 0 .. n
    blocks, a, n = [], 0, q.shape[0]
    while a < n:
        fits = int(np.searchsorted(total, total[a] + SCORE_ENTRIES, side="right")) - 1
        b = max(a + 1, min(a + SCORE_ROWS, fits))
        blocks.append((a, b))
        a = b
    return blocks


PAIR_BLOCK = 1 << 16  # (query, document) pairs per block of :func:`pair_scores`


def pair_scores(q: sp.csr_matrix, s: sp.csr_matrix, qi: np.ndarray, di: np.ndarray) -> np.ndarray:
    """BM25 score of each (query qi[j], doc di[j]) pair, without forming the full score matrix:
    ``(q[qi] ∘ s[di]).sum(axis=1)`` in blocks of ``PAIR_BLOCK`` pairs (each pair's sum is its own
    row's; the row gathers of millions of pairs would page in gigabytes of fresh memory)."""
    out = np.zeros(len(qi), np.float32)
    for a in range(0, len(qi), PAIR_BLOCK):
        b = a + PAIR_BLOCK
        out[a:b] = np.asarray(q[qi[a:b]].multiply(s[di[a:b]]).sum(axis=1)).ravel()
    return out


def prf_expand(
    q: sp.csr_matrix,
    s: sp.csr_matrix,
    docs: int,
    terms: int,
    weight: float,
    st: sp.csr_matrix | None = None,
) -> sp.csr_matrix:
    """Pseudo-relevance feedback (RM3-like, one pass): each query's top ``docs`` BM25 documents give
    expansion terms; the ``terms`` terms not in the query with the largest summed BM25 term score
    over those documents are added, their weights scaled to ``weight`` × the query's own term
    count. ``docs`` 0 returns ``q`` itself. ``q``: (nq, V) counts; ``s``: (n_docs, V) term
    scores; ``st``: ``s.T.tocsr()`` if the caller keeps it (:func:`top_scores`)."""
    if docs <= 0 or terms <= 0 or weight <= 0 or q.shape[0] == 0:
        return q
    nq, nd = q.shape[0], s.shape[0]
    qi, di, _sc, _r = top_scores(q, s, docs, st)
    feedback = sp.csr_matrix((np.ones(len(qi), np.float32), (qi, di)), shape=(nq, nd))
    w = (feedback @ s).tocsr()
    in_query = q.copy()
    in_query.data = np.ones_like(in_query.data)
    w = (w - w.multiply(in_query)).tocsr()
    w.eliminate_zeros()
    ei, ti, ev, _r = topk_sparse(w, terms)
    if len(ei) == 0:
        return q
    total = np.bincount(ei, weights=ev, minlength=nq)
    mass = weight * np.asarray(q.sum(axis=1)).ravel()
    vals = (ev * mass[ei] / total[ei]).astype(np.float32)
    return (q + sp.csr_matrix((vals, (ei, ti)), shape=q.shape)).tocsr()
