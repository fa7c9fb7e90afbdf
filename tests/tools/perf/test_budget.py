"""The stage-by-stage CPU budget without a stack: py-spy's collapsed stacks (synthetic, in its frame format)
folded into buckets, the shares scaled to CPU per answer, a profile folder folded again, the SVG drawn
from the stacks, and the py-spy orchestration against a stand-in py-spy (a real one where installed)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from hybridsearch.tools.perf.budget import (BUCKETS, BUDGET_NAME, OTHER, bucket_of, budget_of_folder, budget_table, fold,
                                            main, process_budget)
from hybridsearch.tools.perf.flame import (COLLAPSED, PROFILE_NAME, Profilers, ProfileSpec, find_py_spy, read_collapsed,
                                           render_svg)

LOOP = "<module> (hybridsearch/cli/__main__.py:5);run (asyncio/runners.py:190);BaseEventLoop._run_once (asyncio/base_events.py:1922);Handle._run (asyncio/events.py:80)"
HANDLER = f"{LOOP};RpcMetricsInterceptor.intercept_service.<locals>.timed.<locals>.wrapper (services/runtime/metrics.py:118);SearchServicer.Search (services/gateway/service.py:70)"
# A gateway's samples as py-spy's raw format writes them: root first, `;` between frames, the count last.
GATEWAY = textwrap.dedent(f"""\
    {HANDLER};_leg (services/gateway/query/legs/runner.py:90);UnaryUnaryMultiCallable.__call__ (grpc/aio/_channel.py:147);UnaryUnaryCall.__init__ (grpc/aio/_call.py:560);serialize (grpc/_common.py:30);_transform (grpc/_common.py:20) 10
    {HANDLER};_leg (services/gateway/query/legs/runner.py:95);deserialize (grpc/_common.py:37);_transform (grpc/_common.py:20) 20
    {HANDLER};respond (services/gateway/query/respond.py:40);preview (services/gateway/query/previews.py:95);EnglishAnalyzer.analyze (services/bm25/analyzer.py:30) 15
    {HANDLER};respond (services/gateway/query/respond.py:44);own_score (services/gateway/query/calibration.py:140) 5
    {HANDLER};Pager.keep (services/gateway/query/paging.py:180) 5
    {HANDLER};fuse (services/gateway/query/fuse.py:30);resolve_params (services/fusion/service.py:50) 5
    {HANDLER};observed (services/gateway/query/observed.py:12);NoOpTracer.start_as_current_span (trace/__init__.py:1200) 5
    {HANDLER};observed (services/gateway/query/observed.py:12);Histogram.observe (prometheus_client/metrics.py:600) 5
    {LOOP};RpcMetricsInterceptor.intercept_service.<locals>.timed.<locals>.wrapper (services/runtime/metrics.py:120) 5
    {HANDLER};plan_search (services/gateway/query/request.py:70);check_collection (services/contract/validation.py:20) 10
    {HANDLER};_leg (services/gateway/query/legs/runner.py:88);AsyncAbstractUnitOfWork.__aenter__ (purgatory/service/_async/unit_of_work.py:28) 4
    {LOOP} 10
    {LOOP};BaseEventLoop.create_task (asyncio/base_events.py:436) 5
""")
VECTOR = textwrap.dedent(f"""\
    _bootstrap (threading.py:995);_worker (concurrent/futures/thread.py:83);OnnxEmbedder.embed (services/vector/embedder.py:96);Session.run (onnxruntime/capi/onnxruntime_inference_collection.py:220) 60
    {LOOP};VectorServicer.Search (services/vector/service.py:200);VectorEngine.search (services/vector/service.py:100);EdgeStore.search (services/vector/edge.py:300) 30
    {LOOP};guarded_decoder.<locals>.decoder (services/contract/wire.py:33) 10
""")


def stacks(text: str):
    return read_collapsed(text)


def test_each_sample_goes_to_its_stage():
    buckets, other = fold(stacks(GATEWAY))
    assert dict(buckets) == {"serialise": 10, "parse": 20, "previews": 15, "calibration": 5, "paging": 5, "fusion": 5,
                             "tracing": 5, "metrics": 10, OTHER: 10, "send/recv and gRPC core": 15, "circuit breakers": 4}
    # the handler's own code under the metrics wrapper is not the wrapper's: `leaf:` patterns own self time only
    assert dict(other) == {"check_collection (services/contract/validation.py:20)": 10}
    buckets, _ = fold(stacks(VECTOR))
    assert dict(buckets) == {"embedding": 60, "engine": 30, "parse": 10}


def test_the_first_bucket_in_table_order_wins():
    stack = ("a (services/gateway/query/previews.py:1)", "b (services/gateway/query/calibration.py:2)")
    assert bucket_of(stack) == "previews"  # both match: previews comes first in BUCKETS
    assert bucket_of(stack, {"calibration": ["calibration.py"], "previews": ["previews.py"]}) == "calibration"
    assert bucket_of(("x (asyncio/events.py:1)", "y (mine.py:2)"), {"loop": ["leaf:asyncio/"]}) == OTHER
    assert bucket_of((), BUCKETS) == OTHER
    lookup = ("Search (services/vector/service.py:1)", "QueryVectorCache.embed (services/vector/query_cache.py:2)")
    assert bucket_of(lookup) == "query vector cache"
    assert bucket_of((*lookup, "OnnxEmbedder.embed (services/vector/embedder.py:3)")) == "embedding"
    assert list(BUCKETS)[:2] == ["parse", "serialise"]  # "deserialize (grpc/..." contains "serialize (grpc/..."


def test_shares_times_cpu_per_answer_and_what_the_samples_saw():
    budget = process_budget(stacks(VECTOR), cpu_ms_per_answer=12.0, rate=100, cpu_ms_in_window=2000.0)
    assert budget["samples"] == 100 and budget["samples_per_bucket"] == {"parse": 10, "embedding": 60, "engine": 30}
    assert budget["ms_per_answer"] == {"parse": 1.2, "embedding": 7.2, "engine": 3.6}
    assert budget["sampled_over_cpu"] == 0.5  # 100 samples at 100/s = 1 s of CPU sampled of the 2 s /proc counted
    assert process_budget(stacks(VECTOR), None, 100, None)["ms_per_answer"] == {}


def profile_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / f"gateway{COLLAPSED}").write_text(GATEWAY)
    (folder / f"vector{COLLAPSED}").write_text(VECTOR)
    (folder / PROFILE_NAME).write_text(json.dumps({
        "rate": 100, "window_s": 10.0, "run": "fast", "answers": 500, "processes": ["vector", "gateway"],
        "cpu_ms_per_answer": {"gateway": 4.0, "vector": 12.0, "bm25": 3.0},
        "cpu_ms_in_window": {"gateway": 1100.0, "vector": 1000.0}}))
    return folder


def test_a_profile_folder_folds_into_the_budget_table(tmp_path, capsys):
    folder = profile_folder(tmp_path / "profile")
    budget = budget_of_folder(folder)
    assert list(budget["processes"]) == ["gateway", "vector"] and budget["answers"] == 500
    gateway = budget["processes"]["gateway"]
    assert gateway["samples"] == 104 and gateway["ms_per_answer"]["parse"] == round(20 / 104 * 4.0, 3)
    assert sum(gateway["ms_per_answer"].values()) == pytest.approx(4.0, abs=0.01)
    out = io.StringIO()
    Console(file=out, width=200).print(budget_table(budget))
    embedding = next(line for line in out.getvalue().splitlines() if "embedding" in line)
    assert "7.20" in embedding and "CPU ms / answer" in out.getvalue()
    sampled = next(line for line in out.getvalue().splitlines() if "sampled s / CPU s" in line)
    assert "0.94" in sampled and "1.00" in sampled  # 104 and 100 samples at 100/s against 1.1 s and 1.0 s of CPU
    main([str(folder)])
    assert json.loads((folder / BUDGET_NAME).read_text())["processes"]["vector"]["ms_per_answer"]["embedding"] == 7.2
    assert "most of 'other': check_collection" in capsys.readouterr().out


def test_the_flame_graph_is_an_svg_with_a_box_per_frame():
    svg = render_svg(stacks(VECTOR), "vector: py-spy, 100/s")
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert "OnnxEmbedder.embed (services/vector/embedder.py:96) (60 samples, 60.00%)" in titles
    assert len(root.findall("{http://www.w3.org/2000/svg}g")) == len(titles) == 12  # 4 + 7 + 5 frames, the loop's 4 shared
    assert "vector: py-spy, 100/s: 100 samples" in svg and "&lt;locals&gt;" in svg  # escaped frame names


FAKE_PY_SPY = textwrap.dedent("""\
    import signal, sys, time
    args = sys.argv[1:]
    output = args[args.index("--output") + 1]
    pid = args[args.index("--pid") + 1]
    def stop(*_):
        open(output, "w").write(f"main (fake.py:1);work (fake.py:{pid}) 7\\n")
        sys.exit(0)
    signal.signal(signal.SIGINT, stop)
    while True:
        time.sleep(0.05)
""")


def test_profilers_record_each_python_service_until_the_run_ends(tmp_path, monkeypatch):
    fake = tmp_path / "py-spy"
    fake.write_text(f"#!{sys.executable}\n{FAKE_PY_SPY}")
    fake.chmod(0o755)
    monkeypatch.setattr("hybridsearch.tools.perf.flame.ATTACH_S", 0.5)  # the stand-in's interpreter starts first
    with Profilers(ProfileSpec(tmp_path / "out", str(fake)), {"gateway": os.getpid(), "redis": 1}) as profilers:
        time.sleep(0.2)
    assert profilers.record["processes"] == ["gateway"] and profilers.record["failed"] == {}  # redis is no Python
    assert read_collapsed((tmp_path / "out" / f"gateway{COLLAPSED}").read_text()) == {
        ("main (fake.py:1)", f"work (fake.py:{os.getpid()})"): 7}
    assert (tmp_path / "out" / "gateway.svg").read_text().startswith("<svg")
    assert profilers.record["cpu_ms_in_window"]["gateway"] > 0
    path = profilers.write({"gateway": 3.0}, 40, "fast")
    assert json.loads(path.read_text())["cpu_ms_per_answer"] == {"gateway": 3.0}


def test_without_py_spy_the_hint_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(FileNotFoundError, match="pip install py-spy"):
        find_py_spy()
    with pytest.raises(FileNotFoundError):
        find_py_spy(str(tmp_path / "nope"))


def test_a_real_py_spy_samples_a_busy_python_process(tmp_path):
    try:
        py_spy = find_py_spy(os.environ.get("PY_SPY"))
    except FileNotFoundError:
        pytest.skip("py-spy is not installed (PY_SPY=/path/to/py-spy to name one)")
    busy = subprocess.Popen([sys.executable, "-c", "import json, time\nt = time.time()\n"
                             "while time.time() - t < 20: json.dumps(list(range(200)))"])
    try:
        time.sleep(1.0)  # the interpreter up before py-spy looks for it
        with Profilers(ProfileSpec(tmp_path, py_spy, rate=50), {"fusion": busy.pid}) as profilers:
            time.sleep(1.5)
    finally:
        busy.kill()
        busy.wait()
    assert profilers.record["failed"] == {}, profilers.record["failed"]
    sampled = read_collapsed((tmp_path / f"fusion{COLLAPSED}").read_text())
    assert sum(sampled.values()) > 20 and any("json/" in frame for stack in sampled for frame in stack)
