"""Corpus-level residual-novelty analysis (``analyze`` stage; also ``recall analyze <run_dir>``).

An NMF topic model over all node embeddings (the same batched kernel as the residual channel, on
|embeddings| by default): each topic's top nodes and top terms (tf-idf), each node's dominant topic and its
share, and how each query's recall set spreads over topics. Writes ``topics.parquet`` (one row per
topic), ``node_topics.parquet`` (one row per node) and ``recall_topics.parquet`` (one row per query).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.channels import lexical


def topic_model(
    xb: np.ndarray, k: int = 20, mode: str = "abs", max_iter: int = 200, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """(W (n, k) node-topic weights, H (k, d') topics) for the corpus embeddings xb (n, d)."""
    import torch  # deferred: a run without topic analysis never loads torch

    from pipeline.ops.nmf import nmf_batched, prepare_basis

    n = xb.shape[0]
    k = max(1, min(k, n))
    E = torch.as_tensor(xb[None], dtype=torch.float32, device=device)
    m = torch.tensor([n], device=device)
    V, _ = prepare_basis(E, mode, m=m)
    W, H, _info = nmf_batched(V, m, torch.tensor([k], device=device), max_iter=max_iter)
    return W[0, :, :k].cpu().numpy(), H[0, :k].cpu().numpy()


def analyze(
    nodes: pl.DataFrame,
    xb: np.ndarray,
    recall: pl.DataFrame | None,
    k: int = 20,
    top: int = 5,
    mode: str = "abs",
    device: str = "cpu",
) -> dict[str, pl.DataFrame]:
    """NMF topics of the node embeddings: topic table, each node's main topic and, with recall, topics per query."""
    W, _H = topic_model(xb, k, mode, device=device)
    k = W.shape[1]
    share = W / np.maximum(W.sum(axis=1, keepdims=True), 1e-12)
    dom = share.argmax(axis=1)
    node_topics = pl.DataFrame(
        {
            "node_id": nodes["node_id"],
            "topic": dom.astype(np.int32),
            "share": share[np.arange(len(dom)), dom],
        }
    )
    tok = lexical.make_tokenizer("en")
    tf = lexical.tokenize_fields(tok, {"body": nodes["text"].fill_null("").to_list()})
    vocab = np.array(sorted(tf.vocab, key=tf.vocab.get))
    counts = tf.fields["body"]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    idf = np.log((counts.shape[0] + 1) / (df + 1))  # frequent words ("from", "2026") sink
    term_w = (
        np.asarray((counts.T @ W).T) * idf[None, :]
    )  # (k, V): tf-idf weight of each term per topic
    ids = nodes["node_id"].to_numpy()
    topics = pl.DataFrame(
        {
            "topic": np.arange(k, dtype=np.int32),
            "size": np.bincount(dom, minlength=k).astype(np.int64),
            "top_nodes": [
                ids[np.argsort(-W[:, t], kind="stable")[:top]].tolist() for t in range(k)
            ],
            "top_terms": [
                [str(v) for v in vocab[np.argsort(-term_w[t], kind="stable")[:top]] if v]
                for t in range(k)
            ],
        }
    )
    out = {"topics": topics, "node_topics": node_topics}
    if recall is not None and recall.height:
        r = recall.join(node_topics, on="node_id", how="left")
        out["recall_topics"] = r.group_by("query_id", maintain_order=True).agg(
            n_topics=pl.col("topic").n_unique(),
            main_topic=pl.col("topic").mode().min(),
            main_share=(pl.col("topic") == pl.col("topic").mode().min()).mean(),
        )
    return out
