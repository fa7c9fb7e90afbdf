import pytest

from hybridsearch.expansion.signals import dominant_top_hit, strong_signal


@pytest.mark.parametrize("query,reason", [
    ('"exact phrase" search', "quoted phrase"),
    ("where is parseConfig defined", "identifier-like token"),
    ("ComputeChecksum", "identifier-like token"),
    ("what does HttpClient retry", "identifier-like token"),
    ("MAX_RETRIES default", "identifier-like token"),
    ("call load_model() twice", "identifier-like token"),
    ("os.path.join behaviour", "identifier-like token"),
    ("error ERR404 on start", "identifier-like token"),
])
def test_strong_signals(query, reason):
    assert strong_signal(query) == reason


@pytest.mark.parametrize("query", ["how do vaccines work", "protein folding in cells", "what is BM25?",
                                   "The Hague and Paris in Summer", "what is HyDE"])
def test_ordinary_questions_are_expanded(query):
    assert strong_signal(query) is None


def test_dominant_top_hit():
    assert dominant_top_hit([20.0, 5.0], ratio=1.8, min_score=8.0)
    assert not dominant_top_hit([20.0, 15.0], ratio=1.8, min_score=8.0)
    assert not dominant_top_hit([6.0, 1.0], ratio=1.8, min_score=8.0)  # too weak to trust
    assert not dominant_top_hit([], ratio=1.8, min_score=8.0)
