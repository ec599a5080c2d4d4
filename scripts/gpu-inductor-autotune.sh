#!/usr/bin/env bash
# Make a real Inductor max-autotune cache on a GPU machine (the demo fixture
# demo/h100-inductor-autotune-*.tar.xz): torch.compile(mode="max-autotune-no-cudagraphs") of a
# small MLP at two batch sizes, with TORCHINDUCTOR_CACHE_DIR set, so Inductor benchmarks aten
# addmm/mm against its triton_mm templates and writes each choice's time to <dir>/cache/<hash>.
#   OUT=/some/dir bash scripts/gpu-inductor-autotune.sh
set -euo pipefail
OUT=${OUT:-$PWD/bench-out}
work=$(mktemp -d)
export TORCHINDUCTOR_CACHE_DIR=$work/torchinductor_user
export TORCHINDUCTOR_AUTOTUNE_LOCAL_CACHE=1
python3 - <<'PY'
import torch, triton, sys
print("torch", torch.__version__, "triton", triton.__version__, "python", sys.version.split()[0], torch.cuda.get_device_name())
m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda().half()
f = torch.compile(m, mode="max-autotune-no-cudagraphs", dynamic=False)
with torch.no_grad():
    for bs in (64, 512):
        x = torch.randn(bs, 512, device="cuda", dtype=torch.half)
        torch.testing.assert_close(f(x), m(x), rtol=2e-2, atol=2e-2)
print("ok")
PY
cd "$work"
du -sh torchinductor_user/* | sort -h
find torchinductor_user -maxdepth 1
ls -la torchinductor_user/cache | head
mkdir -p "$OUT"
name=h100-inductor-autotune-triton-$(python3 -c 'import triton; print(triton.__version__)')
mv torchinductor_user "$name"
tar cJf "$OUT/$name.tar.xz" "$name"
ls -la "$OUT"
