"""The fusion library against 4ca117f's (session 22): answers compared on random lists under every method, then the CPU of
fuse() on three lists of 100. Needs /tmp/methods_old.py: `git show 4ca117f:services/fusion/methods.py > /tmp/methods_old.py`.
    .venv/bin/python docs/perf/session-s38/experiments/fuse-ab.py"""
import random, time, sys, importlib.util
sys.path.insert(0,'/tmp')
spec=importlib.util.spec_from_file_location("methods_old","/tmp/methods_old.py"); old=importlib.util.module_from_spec(spec); sys.modules["methods_old"]=old; spec.loader.exec_module(old)
from hybridsearch.fusion import methods as new
random.seed(3)
def rankings(mod, n_lists=3, n=100, ties=False):
    out=[]
    for l in range(n_lists):
        ids=random.sample(range(300), n)
        items=[mod.Item(str(i), f"{i}#{random.randint(0,2)}", float(random.randint(0,5)) if ties else random.random()*10) for i in ids]
        items.sort(key=lambda x:-x.score)
        out.append(mod.Ranking(leg=[1,2,1][l], items=items, kind=[mod.QueryKind.ORIGINAL, mod.QueryKind.ORIGINAL, mod.QueryKind.LEXICAL_VARIANT][l]))
    return out
ok=0
for trial in range(400):
    state=random.getstate()
    ties=trial%2==0
    ro=rankings(old, ties=ties); random.setstate(state); rn=rankings(new, ties=ties)
    for m in ("rrf","linear","zscore","dbsf"):
        po=old.FusionParams(method=old.FusionMethod(m)); pn=new.FusionParams(method=new.FusionMethod(m))
        a=old.fuse(ro,po,100); b=new.fuse(rn,pn,100)
        assert [(f.doc_id,f.chunk_id,f.score,f.normalized,[(e.leg,e.kind.value,e.rank,e.score) for e in f.evidence]) for f in a]==[(f.doc_id,f.chunk_id,f.score,f.normalized,[(e.leg,e.kind.value,e.rank,e.score) for e in f.evidence]) for f in b], (trial,m)
        ok+=1
print("identical", ok)
random.seed(9); ro=rankings(old,2); random.seed(9); rn=rankings(new,2)
po=old.FusionParams(method=old.FusionMethod.ZSCORE); pn=new.FusionParams(method=new.FusionMethod.ZSCORE)
for r in range(3):
    t=time.process_time(); [old.fuse(ro,po,100) for _ in range(3000)]; a=(time.process_time()-t)/3
    t=time.process_time(); [new.fuse(rn,pn,100) for _ in range(3000)]; b=(time.process_time()-t)/3
    print(f"old {a:.3f} ms new {b:.3f} ms")
import statistics
def two_lists(mod, seed, n_lists=2):
    random.seed(seed); out=[]
    for l in range(n_lists):
        ids=random.sample(range(300), 100)
        items=sorted([mod.Item(str(i), f"{i}#0", random.random()*10) for i in ids], key=lambda x:-x.score)
        out.append(mod.Ranking(leg=l+1, items=items))
    return out
ro=[two_lists(old,s) for s in range(50)]; rn=[two_lists(new,s) for s in range(50)]
po=old.FusionParams(method=old.FusionMethod.ZSCORE); pn=new.FusionParams(method=new.FusionMethod.ZSCORE)
A=[];B=[]
for r in range(12):
    t=time.process_time(); [old.fuse(x,po,100) for _ in range(20) for x in ro]; A.append((time.process_time()-t)/1000*1000)
    t=time.process_time(); [new.fuse(x,pn,100) for _ in range(20) for x in rn]; B.append((time.process_time()-t)/1000*1000)
print("two lists of 100 (FAST's), z-score, 12 alternated rounds of 1,000 fusions: old median %.3f ms (%.3f-%.3f), new median %.3f ms (%.3f-%.3f)" % (statistics.median(A), min(A), max(A), statistics.median(B), min(B), max(B)))
