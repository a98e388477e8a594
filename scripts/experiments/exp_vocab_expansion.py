"""Diagnostic (issue 17): could LLM-free query expansion reach the LoCoMo evidence that shares no
content word with its question? Each question word is expanded to its K nearest words (MiniLM
cosine ≥ TH) of the corpus vocabulary. For each multi-hop / open-domain evidence turn that shares
no content word with its question, the script asks whether an expansion word occurs in it, and how
often one occurs in the other turns of the same conversation (the expansion's false hits).

    python scripts/experiments/exp_vocab_expansion.py [--data ../shared/data/locomo/locomo_dev5.json.gz]

Words: lower-cased `[a-z]{3,}`, minus bm25s's English stopwords, speakers' names and the question
words of exp_evidence_overlap.py; "shares a word" is judged on Snowball stems, as there. Results:
docs/results.md ("Why multi-hop and open-domain evidence is missed").
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import Stemmer

from exp_evidence_overlap import stop_words
from pipeline.adapters import locomo
from pipeline.encoders.models import SentenceEncoder

SETTINGS = ((5, 0.5), (10, 0.45), (20, 0.4))  # (K nearest words, cosine threshold)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo_dev5.json.gz"))
    args = ap.parse_args(argv)
    ds = locomo.load(str(args.data))
    stop = stop_words(ds.nodes)
    stem = Stemmer.Stemmer("english").stemWord

    def words(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z]{3,}", text.lower()) if w not in stop}

    turns = {
        nid: words(re.sub(r"^\w+: ", "", t))
        for nid, t in ds.nodes.select("node_id", "text").iter_rows()
    }
    conv = {nid: nid.split(":")[0] for nid in turns}
    vocab = sorted(set().union(*turns.values()))
    encoder = SentenceEncoder()
    vv = encoder.encode(vocab)
    question = dict(zip(ds.queries["query_id"], ds.queries["text"]))
    group = dict(zip(ds.queries["query_id"], ds.queries["group"]))
    cases = [
        (qid, nid)
        for qid, nid in ds.qrels.select("query_id", "node_id").iter_rows()
        if group.get(qid) in ("1", "3")
        and nid in turns
        and not {stem(w) for w in words(question[qid])} & {stem(w) for w in turns[nid]}
    ]
    qwords = {qid: sorted(words(question[qid])) for qid, _ in cases}
    qvec = {qid: encoder.encode(ws) for qid, ws in qwords.items()}
    print(f"vocabulary {len(vocab)} words; {len(cases)} evidence turns share no word")
    print(
        "| K | cosine ≥ | category | n | evidence turns hit | other turns of the conversation hit |"
    )
    print("|---:|---:|---|---:|---:|---:|")
    for k, th in SETTINGS:
        rows: dict[str, list[tuple[bool, float]]] = {}
        for qid, nid in cases:
            sims = qvec[qid] @ vv.T
            near = {vocab[i] for s in sims for i in np.argsort(-s)[:k] if s[i] >= th}
            near -= set(qwords[qid])
            others = [x for x in turns if conv[x] == conv[nid] and x != nid]
            false = float(np.mean([bool(near & turns[x]) for x in others]))
            rows.setdefault(group[qid], []).append((bool(near & turns[nid]), false))
        for cat, v in sorted(rows.items()):
            a = np.array(v, dtype=float)
            print(
                f"| {k} | {th} | {cat} | {len(v)} | {a[:, 0].mean():.0%} | {a[:, 1].mean():.0%} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
