# Makes demo/h200-vllm-standalone-torch-2.11.tar.xz on a GPU machine (torch 2.11, Triton 3.6; no vLLM).
# Run as it was run (each mode a fresh process, TRITON_CACHE_DIR unset, an empty Inductor dir each):
#   T=/tmp/x; unset TRITON_CACHE_DIR
#   for m in c u b; do TORCHINDUCTOR_CACHE_DIR=$T/i$m python gpu-vllm-standalone.py $m $T; done
# c: two graphs compiled through a torch.compile backend that calls standalone_compile (as vLLM's
#    backend does), each saved in vLLM's layout in both formats, then torch.compile of a third
#    function and torch.compiler.save_cache_artifacts(); u / b: load each artifact of that format
#    in a fresh process and run it, recording what Triton saw. Dynamo's guard building fails after
#    the backend returns ("sources must not be empty for symbol"): the artifacts are saved by then
#    and the error is recorded (e0/e1). cache_key_factors.json (vLLM's file) and ground-truth.json
#    (the gt-*.json merged) were added after the run: see demo/CORPUS.md.
# Kept as it ran (compact: the device command line takes at most 2,000 characters).
import os,sys,json,glob,hashlib as H,torch,triton
M,T=sys.argv[1:3];A=T+'/h100-vllm-standalone-torch-2.11';V=A+'/vllm/torch_compile_cache';G={};E=os.environ['TORCHINDUCTOR_CACHE_DIR']+'/triton/0'
def n1(x,w):y=torch.nn.functional.gelu(x@w);return torch.softmax(y,-1)*2+1,y.sum(-1)
def n2(x):m=x.mean(-1,keepdim=True);v=((x-m)**2).mean(-1,keepdim=True);return ((x-m)*torch.rsqrt(v+1e-5)).relu(),
torch.manual_seed(0);x=torch.randn(512,256,device='cuda');I=[(n1,[x,torch.randn(256,256,device='cuda')]),(n2,[x])]
def mt(d):return [[os.path.relpath(j,d),json.load(open(j)).get('name')] for j in sorted(glob.glob(d+'/*/*.json')) if '__grp' not in j]
hd=lambda f:H.sha256(f.encode()).hexdigest()[:10]
P=lambda f,n=0:f'{V}/{hd(f)}/rank_0_0/backbone/'+f'artifact_compile_range_1_512_subgraph_{n}'*(n>=0)
if M=='c':
 from torch._inductor import standalone_compile as sc
 from torch._inductor.codecache import torch_key as tk
 R=[]
 def be(g,a):R.append(sc(g,a,dynamic_shapes='from_tracing_context',options={}));return R[-1]
 G.update(sig=str(__import__('inspect').signature(sc)),torch_key=tk().hex(),v=[torch.__version__,triton.__version__],static=torch._inductor.config.use_static_cuda_launcher)
 for f in('binary','unpacked'):os.makedirs(P(f,-1))
 for n,(m,a) in enumerate(I):
  torch._dynamo.reset()
  try:torch.compile(m,backend=be,fullgraph=True)(*a)
  except Exception as e:G[f'e{n}']=str(e)[-99:]
  r=R[-1];G[f's{n}']=[dict(r._artifacts[1].artifacts),len(r._artifacts[0])]
  for f in('binary','unpacked'):r.save(path=P(f,n),format=f)
 G['compiled']=mt(E);torch._dynamo.reset();torch.compile(lambda x:torch.tanh(x)*x.sum(0))(x);b,ci=torch.compiler.save_cache_artifacts();os.makedirs(A+'/torch-megacache')
 open(A+'/torch-megacache/cache_artifacts.bin','wb').write(b);G['mega']=[dict(ci.artifacts),len(b)]
else:
 import triton.runtime.cache as C;from torch._inductor.standalone_compile import CompiledArtifact as CA;L=[]
 for q in('get_file','get_group','put'):
  def wr(s,*a,_f=getattr(C.FileCacheManager,q),_q=q,**k):L.append([_q,s.cache_dir,str(a[-1])[:60]]);return _f(s,*a,**k)
  setattr(C.FileCacheManager,q,wr)
 triton.knobs.compilation.listener=lambda **k:L.append(['listener',k.get('cache_hit')]);f={'u':'unpacked','b':'binary'}[M]
 for n,(m,a) in enumerate(I):
  r=CA.load(path=P(f,n),format=f)(*a);e=m(*a);torch.cuda.synchronize();G[f'ok{n}']=all(torch.allclose(u,v,atol=1e-3,rtol=1e-3) for u,v in zip(r,e))
  if f=='unpacked':G[f'triton{n}']=mt(P(f,n)+'/triton/0')
 G.update(ind=mt(E),tcd=os.environ.get('TRITON_CACHE_DIR'),lookups=L)
json.dump(G,open(f'{A}/gt-{M}.json','w'),indent=1,default=str)
