"""Real JIT launches on a GPU with the cachelens hook enabled through the environment only.

Run by scripts/gpu-hook-check.sh on a machine with a GPU, PyTorch and Triton (not in CI).
Launches vector add (3 dtypes x 2 BLOCK), softmax (num_warps 4/8) and an autotuned matmul.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + offs, num / tl.sum(num, axis=0), mask=offs < n_cols)


@triton.autotune(
    configs=[triton.Config({"BM": bm, "BN": 64, "BK": 32}, num_warps=w, num_stages=s)
             for bm in (64, 128) for w in (4, 8) for s in (3, 4)],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


def main():
    dev = "cuda"
    n = 1 << 20
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(n, device=dev, dtype=dtype)
        y = torch.randn(n, device=dev, dtype=dtype)
        for block in (256, 1024):
            out = torch.empty_like(x)
            add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
            torch.testing.assert_close(out, x + y)
    inp = torch.randn(512, 1000, device=dev)
    for w in (4, 8):
        out = torch.empty_like(inp)
        softmax_kernel[(512,)](out, inp, inp.stride(0), 1000, BLOCK=1024, num_warps=w)
        torch.testing.assert_close(out, torch.softmax(inp, dim=1))
    M = N = K = 512
    a = torch.randn(M, K, device=dev, dtype=torch.float16)
    b = torch.randn(K, N, device=dev, dtype=torch.float16)
    c = torch.empty(M, N, device=dev, dtype=torch.float16)
    matmul_kernel[lambda m: (M // m["BM"], N // m["BN"])](a, b, c, M, N, K)
    torch.testing.assert_close(c, a @ b, atol=1e-1, rtol=1e-2)
    torch.cuda.synchronize()
    print("launches ok; triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
