"""Compare language detectors on short_queries.json (20 English, 20 German queries, 10 names), restricted
to the languages text/language.py supports. Not a test: py3langid 0.4.0 needs numpy >= 2, so it runs
from a separate folder, e.g.

    pip install --target /tmp/langtest py3langid==0.4.0 lingua-language-detector==2.1.1
    PYTHONPATH=/tmp/langtest python tests/data/languages/compare_detectors.py

(the project's venv has numpy < 2; /tmp/langtest brings its own numpy 2 for py3langid)."""

import json
import time
from pathlib import Path

SUPPORTED = ("en", "de", "fr", "es", "it", "nl", "pt", "da", "no", "sv", "ru", "tr")
data = json.loads((Path(__file__).parent / "short_queries.json").read_text())
cases = [(q, "en") for q in data["en"]] + [(q, "de") for q in data["de"]]


def py3langid_detector():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(sorted(set(SUPPORTED) & set(ident.labels)))
    return ident.classify


def lingua_detector():
    from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

    codes = {Language.from_iso_code_639_1(getattr(IsoCode639_1, "NB" if c == "no" else c.upper())): c for c in SUPPORTED}
    detector = LanguageDetectorBuilder.from_languages(*codes).with_preloaded_language_models().build()

    def best(text):
        top = detector.compute_language_confidence_values(text)[0]
        return codes[top.language], top.value
    return best


for name, make in (("py3langid", py3langid_detector), ("lingua", lingua_detector)):
    started = time.perf_counter()
    detect = make()
    loaded = time.perf_counter() - started
    results = [(detect(q), want) for q, want in cases]
    names = [detect(q) for q in data["names"]]
    for floor in (0.2, 0.3, 0.5):
        right = sum(1 for (lang, p), want in results if p >= floor and lang == want)
        wrong = sum(1 for (lang, p), want in results if p >= floor and lang != want)
        print(f"{name} floor {floor}: right {right}/{len(cases)}, wrong {wrong}, below the floor "
              f"{len(cases) - right - wrong}; names taken for a language {sum(p >= floor for _, p in names)}/{len(names)}")
    started = time.perf_counter()
    for q, _ in cases * 5:
        detect(q)
    print(f"{name}: load {loaded:.2f} s, {(time.perf_counter() - started) / (5 * len(cases)) * 1000:.3f} ms a query")
