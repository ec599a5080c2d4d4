#!/usr/bin/env python3
"""Compile real Triton kernels (add, softmax, layernorm, matmul) into $TRITON_CACHE_DIR, on CPU.

Kernels sit on the lines/columns of the corpus generator: their `.source` (TTIR) matches the
corpus text but for the file path. Keep lines 1-69 as they are. Usage: `--help`."""
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + y, mask=m)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def layernorm_kernel(X, Y, W, B, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * stride + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    y = xc / tl.sqrt(var + eps) * tl.load(W + cols, mask=m) + tl.load(B + cols, mask=m)
    tl.store(Y + row * stride + cols, y, mask=m)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    per_group = GROUP * npn
    gid = pid // per_group
    first = gid * GROUP
    gsz = min(npm - first, GROUP)
    pm = first + ((pid % per_group) % gsz)
    pn = (pid % per_group) // gsz
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    ap = a + rm[:, None] * sam + rk[None, :] * sak
    bp = b + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        av = tl.load(ap, mask=rk[None, :] < K - k * BK, other=0.0)
        bv = tl.load(bp, mask=rk[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(av, bv, acc)
        ap += BK * sak
        bp += BK * sbk
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    tl.store(c + cm[:, None] * scm + cn[None, :] * scn, acc.to(tl.float16),
             mask=(cm[:, None] < M) & (cn[None, :] < N))


# --------------------------------------------------------------------------------------------
# Everything below may move freely.
#
# What the corpus was made from (read off its .source/.json files): every pointer argument is
# 16-byte aligned (`tt.divisibility = 16`, what a JIT launch with torch tensors gives), integer
# arguments are not specialised, and
#   add        fp32/fp16/bf16 x BLOCK 256/1024                   (num_warps 4)
#   softmax    fp32, BLOCK 1024/2048/4096 x num_warps 4/8
#   layernorm  fp16, BLOCK 512/1024/4096, num_warps 8
#   matmul     fp16, (BM,BN,BK) in 5 tiles, GROUP 8, num_warps 4/8 x num_stages 3/4/5 (CUDA)
#              or the backend's default num_stages (HIP: 2)
# = 45 kernels on CUDA, 25 on HIP.

import argparse
import json
import os
import sys
import time

KERNELS = {
    "add": add_kernel,
    "softmax": softmax_kernel,
    "layernorm": layernorm_kernel,
    "matmul": matmul_kernel,
}

MATMUL_TILES = [(128, 256, 64), (128, 128, 64), (128, 64, 32), (64, 128, 32), (64, 64, 32)]


def configs(kernels, backend):
    """Yield (kernel name, fn, signature, constexprs, pointer arg indices, options)."""
    if "add" in kernels:
        for dt in ("fp32", "fp16", "bf16"):
            for block in (256, 1024):
                sig = {"x_ptr": "*" + dt, "y_ptr": "*" + dt, "out_ptr": "*" + dt, "n": "i32",
                       "BLOCK": "constexpr"}
                yield "add", add_kernel, sig, {"BLOCK": block}, (0, 1, 2), {}
    if "softmax" in kernels:
        for nw in (4, 8):
            for block in (1024, 2048, 4096):
                sig = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
                       "n_cols": "i32", "BLOCK": "constexpr"}
                yield "softmax", softmax_kernel, sig, {"BLOCK": block}, (0, 1), {"num_warps": nw}
    if "layernorm" in kernels:
        for block in (512, 1024, 4096):
            sig = {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "B": "*fp16", "stride": "i32", "N": "i32",
                   "eps": "fp32", "BLOCK": "constexpr"}
            yield "layernorm", layernorm_kernel, sig, {"BLOCK": block}, (0, 1, 2, 3), {"num_warps": 8}
    if "matmul" in kernels:
        stages = (3, 4, 5) if backend == "cuda" else (None, )
        for nw in (4, 8):
            for ns in stages:
                for bm, bn, bk in MATMUL_TILES:
                    sig = {"a": "*fp16", "b": "*fp16", "c": "*fp16"}
                    sig.update({k: "i32" for k in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")})
                    sig.update({k: "constexpr" for k in ("BM", "BN", "BK", "GROUP")})
                    opts = {"num_warps": nw}
                    if ns is not None:
                        opts["num_stages"] = ns
                    yield ("matmul", matmul_kernel, sig, {"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, (0, 1, 2),
                           opts)


def make_source(fn, sig, constexprs, ptr_idx):
    """An ASTSource for this Triton version (3.3+: dict attrs; 3.0-3.2: AttrsDescriptor)."""
    from triton.compiler import ASTSource
    try:
        from triton.backends.compiler import AttrsDescriptor  # 3.2 only
    except ImportError:
        AttrsDescriptor = None
    try:
        from triton.compiler.compiler import AttrsDescriptor as OldAttrs  # 3.0, 3.1
    except ImportError:
        OldAttrs = None
    import inspect
    params = inspect.signature(ASTSource.__init__).parameters
    if "constexprs" in params:  # 3.3+
        attrs = {(i, ): [["tt.divisibility", 16]] for i in ptr_idx}
        return ASTSource(fn, sig, constexprs=constexprs, attrs=attrs)
    names = list(sig)
    if AttrsDescriptor is not None:  # 3.2: string keys
        sig2 = {k: v for k, v in sig.items() if v != "constexpr"}
        for k in constexprs:
            sig2[k] = "constexpr"
        attrs = AttrsDescriptor.from_dict({"arg_properties": {"tt.divisibility": list(ptr_idx)},
                                           "cls": AttrsDescriptor.__name__})
        return ASTSource(fn, sig2, constants=dict(constexprs), attrs=attrs)
    # 3.0/3.1: index keys, constants by index
    sig2 = {i: t for i, (k, t) in enumerate(sig.items()) if t != "constexpr"}
    consts = {names.index(k): v for k, v in constexprs.items()}
    attrs = OldAttrs(divisible_by_16=tuple(ptr_idx), equal_to_1=())
    return ASTSource(fn, sig2, constants=consts, attrs=attrs)


def parse_target(s):
    from triton.backends.compiler import GPUTarget
    backend, _, arch = s.partition(":")
    if backend == "cuda":
        return GPUTarget("cuda", int(arch or 90), 32)
    if backend == "hip":
        return GPUTarget("hip", arch or "gfx942", 64)
    raise SystemExit(f"unknown target {s!r}: use cuda:<sm> (e.g. cuda:90, cuda:80) or hip:<gfx> (hip:gfx942)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compile the corpus kernels into $TRITON_CACHE_DIR (CPU only).")
    ap.add_argument("--target", default="cuda:90", help="cuda:90 (default), cuda:80, hip:gfx942, ...")
    ap.add_argument("--kernels", default=",".join(KERNELS), help="subset, e.g. add,softmax")
    ap.add_argument("--repeat", type=int, default=1, help="compile the whole set N times in this process")
    ap.add_argument("--limit", type=int, default=0, help="compile only the first N configs (0: all)")
    args = ap.parse_args(argv)

    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise SystemExit(f"unknown kernels {unknown}; choose from {list(KERNELS)}")
    target = parse_target(args.target)
    cfgs = list(configs(kernels, target.backend))
    if args.limit:
        cfgs = cfgs[:args.limit]

    t0 = time.perf_counter()
    keys = []
    for _ in range(max(1, args.repeat)):
        keys = []
        for name, fn, sig, constexprs, ptr_idx, opts in cfgs:
            src = make_source(fn, sig, constexprs, ptr_idx)
            k = triton.compile(src, target=target, options=opts)
            keys.append(_key_of(k.hash))
    elapsed = time.perf_counter() - t0
    print(json.dumps({
        "triton_version": triton.__version__,
        "target": f"{target.backend}:{target.arch}",
        "warp_size": target.warp_size,
        "cache_dir": os.environ.get("TRITON_CACHE_DIR"),
        "compiled": len(cfgs),
        "repeat": max(1, args.repeat),
        "seconds": round(elapsed, 3),
        "keys": keys,
    }))
    return 0


def _key_of(hex_hash):
    """The cache key dir name for a kernel hash: base32 (3.3+), urlsafe base64 (3.2), hex (3.0/3.1)."""
    from triton.runtime import cache
    if hasattr(cache, "_base32"):
        return cache._base32(hex_hash)
    if hasattr(cache, "_base64"):
        return cache._base64(hex_hash)
    return hex_hash


if __name__ == "__main__":
    sys.exit(main())
