"""Settings (config.settings): the fusion section's leg weights, keyed by leg name, and their old names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hybridsearch.config.search import FusionSettings
from hybridsearch.config.settings import Settings


def test_a_map_sets_the_legs_it_names_and_the_others_keep_their_defaults():
    fusion = FusionSettings(leg_weights={"bm25": 0.4, "vector": 0.6})
    assert fusion.leg_weights == {"bm25": 0.4, "vector": 0.6, "tag": 0.5, "graph": 0.25}
    assert fusion.rrf_leg_weights == FusionSettings().rrf_leg_weights


def test_the_old_names_still_set_their_legs_and_an_entry_of_the_map_wins():
    fusion = FusionSettings(bm25_weight=0.1, rrf_tag_weight=2.0, graph_weight=0.3, leg_weights={"vector": 0.7})
    assert fusion.leg_weights == {"bm25": 0.1, "vector": 0.7, "tag": 0.5, "graph": 0.3}
    assert fusion.rrf_leg_weights == {"bm25": 1.0, "vector": 1.0, "tag": 2.0, "graph": 0.3}
    assert FusionSettings(bm25_weight=0.1, leg_weights={"bm25": 0.2}).leg_weights["bm25"] == 0.2


def test_the_environment_spells_the_map_as_json_or_by_entry_and_the_old_names_still_work(monkeypatch):
    monkeypatch.setenv("HYBRIDSEARCH_FUSION__LEG_WEIGHTS", '{"bm25": 0.4, "vector": 0.6}')
    monkeypatch.setenv("HYBRIDSEARCH_FUSION__RRF_LEG_WEIGHTS__TAG", "2")
    monkeypatch.setenv("HYBRIDSEARCH_FUSION__RRF_VECTOR_WEIGHT", "1.5")  # an old name
    monkeypatch.setenv("HYBRIDSEARCH_FUSION__TAG_WEIGHT", "0.2")  # an old name beside the JSON map
    fusion = Settings().fusion
    assert fusion.leg_weights == {"bm25": 0.4, "vector": 0.6, "tag": 0.2, "graph": 0.25}
    assert fusion.rrf_leg_weights == {"bm25": 1.0, "vector": 1.5, "tag": 2.0, "graph": 0.25}


@pytest.mark.parametrize("fusion, message", [
    ({"leg_weights": {"bm52": 1.0}}, "unknown leg bm52"),
    ({"rrf_leg_weights": {"bm25": -1.0}}, "greater than or equal to 0"),
    ({"leg_weights": {"tag": float("nan")}}, "greater than or equal to 0"),
    ({"vector_weight": -0.5}, "greater than or equal to 0"),
])
def test_a_bad_leg_weight_is_refused_at_start(fusion, message):
    with pytest.raises(ValidationError, match=message):
        Settings(fusion=fusion)


def test_a_query_setting_under_its_old_root_name_is_refused_naming_the_new_one(monkeypatch):
    import pytest
    from pydantic import ValidationError

    from hybridsearch.config.settings import Settings

    monkeypatch.setenv("HYBRIDSEARCH_QUERY__SEARCH_DEADLINE_S", "8")
    assert Settings().query.search_deadline_s == 8.0
    monkeypatch.setenv("HYBRIDSEARCH_LEG_DEPTH", "50")
    with pytest.raises(ValidationError, match="HYBRIDSEARCH_LEG_DEPTH is now HYBRIDSEARCH_QUERY__LEG_DEPTH"):
        Settings()
