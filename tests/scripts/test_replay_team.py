"""scripts/replay_team.py --workload locomo: LoCoMo conversations read as teams, on a tiny
LoCoMo-shaped file (two conversations) with the time order, agents and relevant turns by hand."""

from __future__ import annotations

import importlib.util
import json

import numpy as np

from pipeline.adapters import locomo
from pipeline.channels.collab import slugs
from pipeline.ops.scope import in_scope
from tests.helpers.paths import REPO


def _script():
    path = REPO / "scripts" / "replay_team.py"
    spec = importlib.util.spec_from_file_location("scripts_replay_team", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _turn(dia: str, speaker: str) -> dict:
    return {"dia_id": dia, "speaker": speaker, "text": f"words of {dia}"}


CONVS = [
    {
        "sample_id": "conv-A",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1": [_turn("D1:1", "Ann"), _turn("D1:2", "Bob"), _turn("D1:3", "Ann")],
            "session_2": [_turn("D2:1", "Bob"), _turn("D2:2", "Ann")],
        },
        "qa": [
            {"question": "a0", "evidence": ["D2:1"], "category": 4},  # s2, Bob
            {"question": "a1", "evidence": ["D1:1", "D1:2"], "category": 1},  # tie → D1:2 Bob
            {"question": "a2", "evidence": ["D1:3; D2:2"], "category": 1},  # split; Ann ×2, s2
            {"question": "a3", "evidence": [], "category": 5},  # no evidence: left out
            {"question": "a4", "evidence": ["D9:9"], "category": 4},  # no such turn: left out
            {"question": "a5", "evidence": ["D2:1", "D1:1", "D1:3"], "category": 1},  # Ann 2:1
        ],
    },
    {
        "sample_id": "conv-B",
        "conversation": {
            "speaker_a": "Cy",
            "speaker_b": "Di",
            "session_1": [_turn("D1:1", "Cy"), _turn("D1:2", "Di")],
        },
        "qa": [{"question": "b0", "evidence": ["D1:2"], "category": 2}],  # s1, Di
    },
]


def test_locomo_conversations_as_teams_by_hand(tmp_path):
    path = tmp_path / "tiny_locomo.json"
    path.write_text(json.dumps(CONVS))
    nodes, queries, rel = _script().locomo_teams(locomo.load(str(path)))
    # time order: session of the latest evidence turn, then question order (conversation, qa[i])
    assert queries["query_id"].to_list() == [
        "conv-A:q1",  # session 1
        "conv-B:q0",  # session 1, a later conversation
        "conv-A:q0",  # session 2
        "conv-A:q2",
        "conv-A:q5",
    ]
    assert queries["agent_id"].to_list() == ["Bob", "Di", "Bob", "Ann", "Ann"]
    assert queries["team"].to_list() == ["conv-A", "conv-B", "conv-A", "conv-A", "conv-A"]
    assert queries["group"].to_list() == [
        "conv-A/session_1",
        "conv-B/session_1",
        "conv-A/session_2",
        "conv-A/session_2",
        "conv-A/session_2",
    ]
    assert queries["now"].to_list() == [0, 1, 2, 3, 4]
    assert queries["text"].to_list() == ["a1", "b0", "a0", "a2", "a5"]
    assert rel == {
        "conv-A:q1": {"D1:1", "D1:2"},
        "conv-B:q0": {"D1:2"},
        "conv-A:q0": {"D2:1"},
        "conv-A:q2": {"D1:3", "D2:2"},
        "conv-A:q5": {"D2:1", "D1:1", "D1:3"},
    }
    # every turn is a page, its slug its dia_id; each team's scope is its own turns
    assert slugs(nodes) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D1:1", "D1:2"]
    docs = nodes["doc_id"].to_numpy()
    assert in_scope(docs, ("conv-B",)).tolist() == [False] * 5 + [True] * 2
    assert np.all(in_scope(docs, ("conv-A",))[:5])
