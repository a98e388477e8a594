"""scripts/experiments/exp_evidence_overlap.py on hand-made cases: content words, and the per-category table."""

import polars as pl
import Stemmer

from tests.report.test_bootstrap import _load_script


def test_content_words_drop_stopwords_names_and_question_words_and_stem():
    mod = _load_script("experiments/exp_evidence_overlap")
    stop = {"the", "melanie"} | mod.QUESTION_WORDS
    stem = Stemmer.Stemmer("english").stemWord
    q = mod.content_words("What activities has Melanie done with the kids?", stop, stem)
    assert q == {"activ", "done", "with", "kid"}
    turn = mod.content_words("I'm off to go swimming with the kids", stop, stem)
    assert q & turn == {"with", "kid"}  # "with" is not in this hand-made stop list


def test_report_counts_each_category_share_and_ranks():
    mod = _load_script("experiments/exp_evidence_overlap")
    table = pl.DataFrame(
        {
            "category": ["1", "1", "1", "1", "3"],
            "shares": [False, False, True, True, False],
            "top10": [True, False, True, True, False],
            "top50": [True, False, True, True, True],
        }
    )
    text = mod.report(table)
    assert "| 1 multi-hop | 4 | 2 (50%) | 50.0% / 50.0% | 100.0% / 100.0% |" in text
    assert "| 3 open-domain | 1 | 1 (100%) | 0.0% / 100.0% | - / - |" in text
