"""The differential harness (issue 26, "one answer, second pass"): the same data through every path
— the API with nodes and queries shuffled, precompute after a random edit sequence, packs against
one group at a time and against other pack sizes, small CPU batches, the blocked scan in small
blocks, FAISS on its BLAS path, the device channels' torch code on the CPU (dense.index=torch,
lexical.scorer=torch; default and small blocks), Ray with 1/2/3 shards on 1/2 workers — each run with its own cache,
output folder and memo, its recall table (every column, rows by query and rank) compared with the
reference run's value by value, floats by their bits (``differential.same``).

The data (``differential_corpus``) crosses every size threshold of ``pipeline.core.thresholds``
(:func:`test_the_data_crosses_every_threshold`), and a mutant planted in each of channels, hubs,
diffusion, score and select makes the comparison fail (``test_harness_catches_*_mutant``).
docs/reliability.md, "Differential harness (issue 26)", lists the paths, thresholds and mutants.

Sealed teams (issue 28): the ``oks_team`` recipe on team data with an injection log
(``corpus.with_teams``) through the same paths, a property that other teams' log rows never change
a team's recall rows (``differential.team_seal``), precompute after one new log row, and a collab
mutant that pools the teams' statistics (docs/reliability.md, "Differential harness: sealed teams").
"""

from __future__ import annotations

import contextlib
from collections import defaultdict

import numpy as np
import pytest

from pipeline.core.thresholds import THRESHOLDS
from tests.helpers import differential as h
from tests.helpers import differential_corpus as corpus
from tests.helpers import mutants

# "full" crosses the data thresholds; "medium" and "small" (the same shapes, smaller) serve the
# slower paths and recipes, Ray and the mutants
DATA = {
    "full": corpus.base(),
    "medium": corpus.base(small=8, big=700, many=400, big_q=40, many_q=40),
    "small": corpus.base(small=6, big=150, many=80, big_q=10, many_q=10),
}
DATA["teams"] = corpus.with_teams(DATA["small"])  # oks_team: teams, agents, an injection log
DATA["ties"] = corpus.duplicated(DATA["medium"])  # exact copies: cosine ties at the dense cut
CASES = [
    *[
        ("best", "full", p)
        for p in (h.api_shuffled, h.packs_alone, h.packs_small, h.batches_small, h.faiss_blas)
    ],
    *[("best-exact", "full", p) for p in (h.api_shuffled, h.packs_alone)],
    ("best", "medium", h.precompute_after_edits),
    *[
        ("dpp-wide", "medium", p)
        for p in (h.api_shuffled, h.precompute_after_edits, h.packs_alone, h.packs_small)
    ],
    ("dpp-wide", "medium", h.batches_small),
    *[("bme", "small", p) for p in (h.api_shuffled, h.precompute_after_edits, h.batches_small)],
    ("bme+novelty", "small", h.batches_small),
    *[("best", "medium", p) for p in (h.torch_channels, h.torch_channels_small)],
    ("best", "medium", h.corpus_cached),
    ("best", "medium", h.precompute_cached),
    *[  # issue 45: exact ties across the dense cut, rescored by the threshold scan
        ("best", "ties", p)
        for p in (h.api_shuffled, h.batches_small, h.faiss_blas, h.torch_channels_small)
    ],
    *[
        (r, d, h.device_tail)
        for r, d in (("best", "full"), ("dpp-wide", "medium"), ("bme", "small"))
    ],
]
# Known failures (docs/reliability.md, "Differential harness"): strict, so a fix makes them XPASS
# and fail until the mark is removed — they cannot pass unnoticed.
KNOWN = {}
CASES += [  # oks_team (issue 28): not packable (signals on), so the packs paths do not apply
    ("oks_team", "teams", p)
    for p in (h.api_shuffled, h.precompute_after_edits, h.batches_small, h.corpus_cached)
]
CASES += [  # OKS's native scorer: relevance blocks, packs, precompute after edits
    ("oks-native", "small", p)
    for p in (h.api_shuffled, h.precompute_after_edits, h.packs_small, h.batches_small)
]
RAY = [(s, w) for s in (1, 2, 3) for w in (1, 2)]
SEEN: dict = defaultdict(set)  # threshold → sides reached by every run of this module


def _final(recipe, data, root):
    return h.full(recipe, h.final_data(data), root)


REFERENCE = {
    h.precompute_after_edits: _final,
    h.precompute_cached: _final,
}  # the path a path is compared with (default: full)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """get(recipe, data name, path) → its recall frame, each computed once per module (fresh
    cache/out/memo per run), with the threshold probes on."""
    root = tmp_path_factory.mktemp("differential")
    done = {}

    def get(recipe, data, path):
        key = (recipe, data, path.__name__)
        if key not in done:
            with h.probes() as seen:
                done[key] = path(recipe, DATA[data], root)
            for k, v in seen.items():
                SEEN[k] |= v
        return done[key]

    return get


def _check(runs, recipe, data, path):
    ref = runs(recipe, data, REFERENCE.get(path, h.full))
    got = runs(recipe, data, path)
    if path in (h.precompute_after_edits, h.precompute_cached) and set(got.columns) == set(
        ref.columns
    ):
        got = got.select(ref.columns)  # the cache's partitions keep their own column order
    assert h.same(got, ref), (
        f"{path.__name__} vs {REFERENCE.get(path, h.full).__name__} ({recipe}, {data}): "
        f"{h.differing(got, ref)} of {ref.height} rows differ"
    )


def _params():
    for r, d, p in CASES:
        tag = f"{r}-{d}-{p.__name__}"
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[tag])] if tag in KNOWN else []
        yield pytest.param(r, d, p, id=tag, marks=marks)


@pytest.mark.parametrize(("recipe", "data", "path"), list(_params()))
def test_path_gives_the_reference_bytes(runs, recipe, data, path):
    _check(runs, recipe, data, path)


@pytest.mark.parametrize("data", ["medium", "ties"])
def test_blocked_scan_in_small_blocks_gives_its_default_bytes(runs, data):
    ref, got = runs("best", data, h.blocked), runs("best", data, h.blocked_small)
    assert h.same(got, ref), f"{h.differing(got, ref)} of {ref.height} rows differ"


def test_the_tie_data_crosses_the_dense_cut():
    """The tie data is what its cases need: for most queries whose scope holds more than the dense
    channel's 100 candidates, the 100th and 101st cosines (hashing vectors, float64) are equal, and
    for most of those a note and its copy are both in that tied group."""
    from pipeline.contract.ingest import nodes_and_queries
    from pipeline.encoders.models import HashingEmbedder
    from pipeline.ops.scope import scope_groups
    from pipeline.stages.embed import embed_texts

    nodes, queries = nodes_and_queries(corpus.dataset(DATA["ties"]), None)
    enc, k = HashingEmbedder(), 100
    xb = enc.encode(embed_texts(nodes, True)).astype(np.float64)
    xq = enc.encode(queries["text"].to_list()).astype(np.float64)
    ids = np.array(nodes["node_id"].to_list())
    wide = tied = copies = 0
    for _key, rows, qs in scope_groups(nodes, queries):
        if len(rows) <= k:
            continue
        for row in xq[qs] @ xb[rows].T:
            wide += 1
            cut = np.sort(row)[::-1][k - 1 : k + 1]
            if cut[0] == cut[1]:
                tied += 1
                group = set(ids[rows][row == cut[0]].tolist())
                copies += any(f"{t}-c" in group for t in group)
    assert wide >= 100 and tied >= 0.8 * wide and copies >= 0.8 * tied, (wide, tied, copies)


@pytest.fixture(scope="module")
def ray_cluster():
    from pipeline.run.executor import import_ray

    ray = import_ray()  # in the dev extra that make test installs: no skip
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.mark.parametrize(("shards", "workers"), RAY, ids=[f"{s}x{w}" for s, w in RAY])
def test_ray_gives_the_reference_bytes(ray_cluster, runs, shards, workers):
    _check(runs, "best", "small", h.ray_path(shards, workers))


def test_ray_gives_the_reference_bytes_with_teams(ray_cluster, runs):
    """Ray shards carry the injection log (``Dataset.part``): the team recipe's bytes."""
    _check(runs, "oks_team", "teams", h.ray_path(2, 2))


NEEDED = [  # the runs whose probes cross the thresholds (each also a path above)
    ("best", "full", h.full),
    ("best-exact", "full", h.full),  # the exact PPR solver: DENSE_MIN, DENSE_WORK
    ("best", "full", h.packs_small),
    ("best", "full", h.faiss_blas),
    ("best", "full", h.batches_small),
    ("dpp-wide", "medium", h.full),
    ("dpp-wide", "medium", h.batches_small),
    ("bme", "small", h.full),
    ("bme", "small", h.batches_small),
    ("oks-native", "small", h.full),
    ("oks-native", "small", h.batches_small),
    ("bme+novelty", "small", h.full),
    ("bme+novelty", "small", h.batches_small),
    ("best", "medium", h.blocked_small),
    ("best", "medium", h.torch_channels),
    ("best", "medium", h.torch_channels_small),
    ("best", "medium", h.corpus_cached),
    ("best", "full", h.device_tail),
]


def test_the_data_crosses_every_threshold(runs):
    """Every threshold the harness crosses (all but the GPU's and the model's) has a run below it
    and one above it: the thresholds' own values for ``data``, the path's value for ``patched``
    and ``config``."""
    for recipe, data, path in NEEDED:
        runs(recipe, data, path)
    for t in THRESHOLDS:
        if t.crossed in ("cuda", "model"):
            continue
        assert SEEN[t.name] == {"below", "above"}, (t, dict(SEEN))


# ── planted mutants: the comparison must fail ────────────────────────────────────────────────

MUTANT_PATHS = [h.packs_small, h.precompute_after_edits, h.batches_small]
MUTANT_RECIPE = {"select": "dpp-wide"}  # DPP picks are the select stage's statistic


def detected(stage: str | None, recipe: str, root) -> dict:
    """{path name: rows differing from its reference} on the small data, with the stage's mutant
    planted (``stage`` None: the code as it is)."""
    data, out = DATA["small"], {}
    with mutants.planted(stage) if stage else contextlib.nullcontext():
        ref = h.full(recipe, data, root)
        for path in MUTANT_PATHS:
            base = _final(recipe, data, root) if path is h.precompute_after_edits else ref
            out[path.__name__] = h.differing(path(recipe, data, root), base)
    print(f"mutant {stage} ({recipe}, small, {ref.height} rows): {out}")
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """recipe → the same comparisons without a mutant (a path that fails already proves nothing)."""
    root, done = tmp_path_factory.mktemp("clean"), {}

    def get(recipe):
        if recipe not in done:
            done[recipe] = detected(None, recipe, root)
        return done[recipe]

    return get


def _caught(stage, clean, root) -> None:
    recipe = MUTANT_RECIPE.get(stage, "best")
    got, base = detected(stage, recipe, root), clean(recipe)
    assert [p for p in got if got[p] and not base[p]], (stage, got, base)


def test_harness_catches_channels_mutant(clean, tmp_path):
    _caught("channels", clean, tmp_path)


def test_harness_catches_hubs_mutant(clean, tmp_path):
    _caught("hubs", clean, tmp_path)


def test_harness_catches_diffusion_mutant(clean, tmp_path):
    _caught("diffusion", clean, tmp_path)


def test_harness_catches_score_mutant(clean, tmp_path):
    _caught("score", clean, tmp_path)


def test_harness_catches_select_mutant(clean, tmp_path):
    _caught("select", clean, tmp_path)


# ── sealed teams (issue 28): one team's log rows never change another team's recall bytes ────

SEAL_SEEDS = range(4)


@pytest.fixture(scope="module")
def seal(tmp_path_factory, runs):
    """(seed, mutant stage or None) → ``differential.team_seal`` on the team data, each computed
    once per module, against the reference run with the same mutant (if any) planted."""
    root, done, refs = tmp_path_factory.mktemp("seal"), {}, {}

    def get(seed, stage=None):
        if (seed, stage) not in done:
            with mutants.planted(stage) if stage else contextlib.nullcontext():
                if stage not in refs:
                    refs[stage] = (
                        h.full("oks_team", DATA["teams"], root)
                        if stage
                        else runs("oks_team", "teams", h.full)
                    )
                done[seed, stage] = h.team_seal("oks_team", DATA["teams"], root, seed, refs[stage])
        return done[seed, stage]

    return get


@pytest.mark.parametrize("seed", SEAL_SEEDS)
def test_other_teams_log_rows_leave_a_teams_recall_bytes(seal, seed):
    """Log rows of one or two teams deleted, added and the whole log reordered: every column of
    the other teams' recall rows is identical (floats by their bits), and the change reached the
    teams it was made to (the property is not vacuous)."""
    got = seal(seed)
    assert all(ok for changed, ok, _ in got.values() if not changed), got
    assert any(not ok for changed, ok, _ in got.values() if changed), got


def test_harness_catches_collab_mutant(seal):
    """The collab channel counting co-use over every team's rows breaks the seal: with it planted,
    a team whose rows did not change gets other recall rows (and without it, none does)."""
    leaks = {}
    for seed in SEAL_SEEDS[:2]:
        got = seal(seed, "collab")
        print(f"mutant collab (oks_team, teams), seed {seed}: {got}")
        leaks[seed] = sum(n for changed, _, n in got.values() if not changed)
        assert all(ok for changed, ok, _ in seal(seed).values() if not changed)
    assert any(leaks.values()), leaks


def test_precompute_after_one_log_row_recomputes_exactly_its_team(tmp_path):
    """One new log row of team green: precompute misses exactly green's queries, rewrites exactly
    the partitions of their scopes, and then serves what a fresh full run of the grown data gives."""
    from pipeline.recallcache import recipe
    from pipeline.run import precompute
    from tests.helpers.isolated import fresh_cfg

    data = DATA["teams"]
    cfg = fresh_cfg(h.config("oks_team"), tmp_path, h.name("precompute-row"))
    first = precompute.precompute(cfg, dataset=corpus.dataset(data))
    assert (first["hits"], first["misses"]) == (0, len(data["queries"]))
    green = [q for q in data["queries"] if q["team"] == "green"]
    page = corpus.pages(data)[green[0]["doc_scope"][0]]
    grown = {**data, "log": [*data["log"], corpus.log_row("green", 999, 0, page[:2])]}
    got = precompute.precompute(cfg, dataset=corpus.dataset(grown))
    assert (got["hits"], got["misses"]) == (len(data["queries"]) - len(green), len(green))
    scopes = {recipe.scope_id(recipe.scope_of(q["doc_scope"])) for q in green}
    assert set(got["rewritten"]) == scopes, (got["rewritten"], scopes)
    served = h.sorted_recall(precompute.served(cfg.cache_dir))
    fresh = h.full("oks_team", grown, tmp_path)
    served = served.select(fresh.columns)  # the cache's partitions keep their own column order
    assert h.same(served, fresh), f"{h.differing(served, fresh)} of {fresh.height} rows differ"
