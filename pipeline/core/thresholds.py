"""Every size threshold the code branches on, where it lives and what it is compared with.

A branch on a size (a kernel for small inputs, a block width, a pack that closes) is where a
result can start to depend on how much data shares a batch. The differential harness
(``tests/system/test_differential.py``) runs data that has something on each side of every entry here, and
``tests/system/test_thresholds.py`` fails when a module-level integer constant of ``pipeline/`` or a
batch-size key of ``conf/`` is neither listed here nor in :data:`NOT_SIZES` with a reason.

``crossed`` says how the harness crosses it: ``data`` (the generated data has a case on each side
of the real value), ``patched`` (the real value costs more than a CI run can spend, so one path
runs with a smaller value, the way ``tests/run/test_packs.py`` does), ``config`` (a config key: the
batch-size path sets it small), ``model`` (only the MiniLM encoder reads it; the harness embeds with
the hashing embedder) or ``cuda`` (only a GPU run takes that branch).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    """One size threshold: ``module`` and ``name`` (a module constant, ``faiss.cvar.…`` or a
    ``conf/<group>.<key>``), what it is compared with, and how the harness crosses it."""

    module: str
    name: str
    compares: str
    crossed: str  # data | patched | config | model | cuda


THRESHOLDS = (
    Threshold("pipeline.ops.dpp", "GRAM_MAX_P", "DPP/MMR pool width P (Gram matrix or lazy rows)", "data"),
    Threshold("pipeline.ops.dpp", "WIDTH_STEP", "DPP/MMR pool size, rounded up to its multiple", "data"),
    Threshold("pipeline.ops.dpp", "MIN_ROWS", "queries of one DPP/MMR torch batch (padded up to it)", "data"),
    Threshold("pipeline.channels.dense", "TINY", "queries × items of a flat CPU scan (one thread)", "data"),
    Threshold("faiss", "cvar.distance_compute_blas_threshold", "queries per flat search (BLAS)", "patched"),
    Threshold("pipeline.ops.ppr", "DENSE_MIN", "nodes of a PPR component (sparse × dense solve)", "data"),
    Threshold("pipeline.ops.ppr", "DENSE_WORK", "component nodes × queries reaching it", "data"),
    Threshold("pipeline.ops.ppr", "PAIR_NNZ", "operator entries per chunk of (query, component) pairs", "data"),
    Threshold("pipeline.ops.ppr", "BLOCK_BYTES", "bytes of a CPU column block's iterate (its width)", "data"),
    Threshold("pipeline.ops.ppr", "GPU_BLOCK_BYTES", "bytes of a GPU column block's iterate", "cuda"),
    Threshold("pipeline.ops.scope", "JOIN_ABOVE", "scopes × nodes of a membership lookup (join or match)", "data"),
    Threshold("pipeline.run.packs", "SMALL", "nodes of a group that may share a pack", "data"),
    Threshold("pipeline.run.packs", "TARGET", "nodes at which a pack closes", "patched"),
    Threshold("pipeline.core.npzcache", "MIN_ROWS", "nodes of a group from which its field tokens and entity mentions are cached on disk", "patched"),
    Threshold("pipeline.channels.blocked", "search.max_scores", "scores per query chunk of the blocked scan", "patched"),
    Threshold("pipeline.channels.dense_torch", "QUERY_BLOCK", "query rows per block of the torch dense scan", "patched"),
    Threshold("pipeline.ops.pairdot", "HOST_BLOCK", "pairs per block of a CPU rescore, numpy or torch (same bits either side)", "data"),
    Threshold("pipeline.ops.pairdot", "DEVICE_BLOCK", "pairs per block of a rescore on a torch accelerator (same bits either side)", "cuda"),
    Threshold("pipeline.channels.dense_torch", "NODE_BLOCK", "node rows per matrix product of the torch dense scan", "patched"),
    Threshold("pipeline.channels.bm25_device", "BLOCK_SCORES", "query × document scores of one device BM25 block", "patched"),
    Threshold("pipeline.channels.bm25_device", "BLOCK_QUERIES", "query rows of one device BM25 block", "patched"),
    Threshold("pipeline.stages.fuse", "JOIN_QUERIES", "queries per block of a component join (graph, residual)", "patched"),
    Threshold("pipeline.channels.lexical", "PAIR_BLOCK", "(query, document) pairs per block of BM25 pair scores", "patched"),
    Threshold("pipeline.channels.lexical", "SCORE_ROWS", "query rows per block of the BM25 top-k", "patched"),
    Threshold("pipeline.channels.lexical", "SCORE_ENTRIES", "bounded scores per block of the BM25 top-k", "patched"),
    Threshold("pipeline.channels.segvocab", "DENSE_SPAN", "(segment, term) codes per entry of a BM25 layout (dense minimum or sort)", "patched"),
    Threshold("pipeline.channels.dense_range", "RANGE_SCORES", "query × node scores per block of the dense threshold scan", "patched"),
    Threshold("pipeline.channels.candidates", "SEARCH_BLOCK", "query rows per dense search of one scope", "patched"),
    Threshold("pipeline.stages.oks_native", "BLOCK_CELLS", "(queries × words × pages) cells of one block of OKS native relevance", "patched"),
    Threshold("pipeline.ops.scoring", "HEAD_CELLS", "queries × widest query of one padded block of the head cut", "patched"),
    Threshold("pipeline.ops.scoring", "COMBINE_ROWS", "rows per block of the final score", "patched"),
    Threshold("pipeline.core.progress", "INNER_MIN", "queries of a push solve cut into more parts than workers", "patched"),
    Threshold("pipeline.ops.ppr_push", "PUSH_COLS", "queries per part of a host push solve", "patched"),
    Threshold("pipeline.stages.diffuse", "PEDSA_QUERIES", "queries per sparse PEDSA solve", "patched"),
    Threshold("conf", "select.batch", "queries per torch batch of DPP/MMR", "config"),
    Threshold("conf", "diffuse.block", "nodes × queries per PEDSA/expand block", "config"),
    Threshold("conf", "dense.block", "node rows per block of the blocked scan", "config"),
    Threshold("conf", "novelty.batch", "queries per NMF/FISTA batch of novelty", "config"),
    Threshold("conf", "embed.encoder.batch_size", "texts per MiniLM forward pass", "model"),
    Threshold("conf", "embed.encoder.device_batch_size", "texts per MiniLM forward pass on an accelerator", "cuda"),
    Threshold("conf", "embed.encoder.device_pass_tokens", "tokens per MiniLM pass of short texts on an accelerator", "cuda"),
    Threshold("pipeline.encoders.models", "LENGTH_STEP", "tokens a MiniLM text is padded up to", "model"),
    Threshold("pipeline.encoders.models", "MERGE_WIDTH", "padded width up to which MiniLM texts share a CPU pass", "model"),
)  # fmt: skip

# module-level integer constants that are not sizes a branch compares with, and why
NOT_SIZES = {
    "pipeline.cli.main.NAME_WIDTH": "the command column's width in `recall --help` (text layout)",
    "pipeline.adapters.query_files.ST_CONTEXT": "earlier chat messages a SillyTavern query keeps (BME's)",
    "pipeline.hooks.bme.VERSION": "the version of ST-BME's bme_recall card",
    "pipeline.hooks.bme.MAX_NODES": "ST-BME's recallMaxNodes, the nodes a card names",
    "pipeline.hooks.reme.DEFAULT_LIMIT": "ReMe's search limit when a request gives none",
    "pipeline.hooks.reme.MAX_BODY": "the largest request body accepted, a guard, not a compute size",
    "pipeline.channels.candidates.KEPT_MATRICES": "BM25 matrices a memo keeps, a memory bound",
    "pipeline.serve.guard.MAX_BODY": "the largest request body accepted, a guard, not a compute size",
    "pipeline.serve.guard.MAX_DEPTH": "the deepest JSON nesting a request may have, a guard",
    "pipeline.serve.guard.MAX_ERROR": "characters of an error line sent back, a guard",
    "pipeline.serve.mcp_app.DEFAULT_K": "rows the MCP recall tool returns when k is not given",
    "pipeline.serve.service.SCOPE_VERSIONS": "scope versions a loaded service keeps, a memory bound",
    "pipeline.recallcache.reader.RETRIES": "reads of a generation retried while a precompute swaps it",
    "pipeline.recallcache.layout.KEEP": "finished generations kept beside the live one for readers",
    "pipeline.inject.reme.MAX_LINKS_PER_DIRECTION": "ReMe's link-expansion lines per direction",
    "pipeline.writeback.bme.RECENT_RECALL_OWNER_LIMIT": "ST-BME's recentRecallOwnerKeys length",
    "pipeline.adapters.bme_nodes.INHIBIT_EDGE_TYPE": "ST-BME's edgeType code of an inhibitory edge",
    "pipeline.adapters.bme_store.GRAPH_VERSION": "the newest ST-BME graph version read",
    "pipeline.adapters.reme_meta.META_VERSION": "the version of ReMe's meta/*.json signal files",
    "pipeline.writeback.reme.ACCESS_LOG_VERSION": "the version of the access log written",
    "pipeline.writeback.reme.WINDOW_DAYS": "ReMe's 30-day hit window, in days",
    "pipeline.writeback.bme.MAX_RECALL_NODES": "BME's per-query recall cap (recallMaxNodes)",
    "pipeline.synth.corpus.CHUNK": "rows of synthetic noise drawn at a time: the same draws, bits",
    "pipeline.core.progress.STEPS": "log lines per piece of work, not a size the computation reads",
    "pipeline.core.npzcache.KEEP_FILES": "files a corpus-side cache folder keeps: disk use, not a size the computation reads",
    "pipeline.inject.oks.MINLEN": "OKS's hook skips prompts shorter than this, per prompt",
    "pipeline.inject.oks.PER_PAGE_CHARS": "characters of a page's preview (OKS's hook)",
    "pipeline.inject.oks.PREVIEW_CHARS": "characters of a page's preview line (OKS's hook)",
    "pipeline.ops.nmf.ALIGN": "a memory alignment (floats) fixed per problem, not a batch size",
    "pipeline.ops.nmf.MAX_TOPICS": "a cap on the topic count asked for, not a batch size",
    "pipeline.channels.dense.RESCORE_EXTRA": "hits per query searched past the cut, rescored exactly",
    "pipeline.ops.speakers.GATE_TOP": "ranks of one query's own first pass",
    "pipeline.stages.score.DAY_US": "a unit (microseconds per day)",
    "pipeline.stages.signals.SIGNALS_VERSION": "a table version",
    "pipeline.stages.signals.DAY_US": "a unit (microseconds per day)",
    "pipeline.inject.bme.GLOBAL_CAP": "BME's per-query injection cap, one query at a time",
    "pipeline.report.plots.DPI": "plot resolution",
    "pipeline.report.plots.TITLE": "a font size",
    "pipeline.report.plots.LABEL": "a font size",
    "pipeline.report.plots.TICK": "a font size",
    "pipeline.ops.nmf.LCG_SEED": "the seed of NMF's fixed pseudo-random start",
    "pipeline.ops.nmf.LCG_A": "a constant of that generator",
    "pipeline.ops.nmf.LCG_C": "a constant of that generator",
    "pipeline.ops.nmf.LCG_MOD": "a constant of that generator",
    "pipeline.report.bootstrap.N_RESAMPLES": "bootstrap resamples of the report (not recall)",
    "pipeline.report.bootstrap.SEED": "a seed",
    "pipeline.report.bootstrap._CHUNK": "resamples drawn at once; the report's intervals only",
    "pipeline.channels.segvocab.POS_BITS": "a bit shift of a sort key",
    "pipeline.ops.topk.KEY_BITS": "the bits of a packed int64 sort key, not a batch size",
    "pipeline.core.backend.SIGN_BIT": "a float64's sign bit (backend.float_keys), not a size",
    "pipeline.run.feedback.WINDOW_DAYS": "ReMe's access window in days",
    "pipeline.run.autopreset.MENTION_MIN_LEN": "characters of a title",
    "conf:cooccur.max_per_batch": "BME's co-occurrence batch: a slice of one query's recall set",
}

# the keys of conf/ whose name says they size a batch or a block (tests/system/test_thresholds.py)
BATCH_KEYS = ("batch", "block", "batch_size", "max_per_batch", "chunk", "chunk_size")
