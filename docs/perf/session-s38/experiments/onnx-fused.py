"""The query embedding with onnxruntime's transformer fusions applied to the exported MiniLM graph (session 22): per-query
CPU of the exported graph and of the optimised one, one thread, SciFact queries, and their vectors' agreement.
    HYBRIDSEARCH_MODELS_DIR=var/models .venv/bin/python docs/perf/session-s38/experiments/onnx-fused.py"""
import json, time, numpy as np, onnxruntime as ort
from onnxruntime.transformers.optimizer import optimize_model
src="var/models/minilm-fp32/model.onnx"
m=optimize_model(src, model_type="bert", num_heads=12, hidden_size=384, opt_level=1)
print(m.get_fused_operator_statistics())
m.save_model_to_file("/tmp/minilm-opt.onnx")
from hybridsearch.vector.embedder import OnnxEmbedder
e=OnnxEmbedder("minilm-fp32", 256, threads=1); f=OnnxEmbedder("minilm-fp32", 256, threads=1)
o=ort.SessionOptions(); o.intra_op_num_threads=1
f.session=ort.InferenceSession("/tmp/minilm-opt.onnx", o, providers=["CPUExecutionProvider"])
qs=[json.loads(l)["text"] for l in open("../shared/datasets/scifact/queries.jsonl")][:200]
for r in range(3):
    for name, x in (("exported", e), ("fused", f)):
        t=time.thread_time(); [x.embed([q]) for q in qs]; print(name, round((time.thread_time()-t)/len(qs)*1000, 3), "ms a query")
va=np.array([e.embed([q])[0] for q in qs]); vb=np.array([f.embed([q])[0] for q in qs]); print("min cosine", (va*vb).sum(1).min())
