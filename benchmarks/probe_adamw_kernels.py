"""Which device-scalar formulations of AdamW's per-step ops reproduce torch's foreach AdamW bitwise (CUDA).

The non-capturable foreach AdamW passes step-dependent Python floats (bias corrections, step size) as kernel
arguments; a CUDA graph replays fixed arguments, so an in-graph AdamW must read them from device memory. This
probe runs torch's ``_multi_tensor_adam`` and candidate formulations on the same data for several steps and
prints which are bitwise equal (parameters, exp_avg, exp_avg_sq), plus per-step GPU times.

    python3 benchmarks/probe_adamw_kernels.py
"""
import time

import torch
from torch.optim import adam

dev = torch.device("cuda")
LR, WD, B1, B2, EPS = 5e-3, 0.01, 0.9, 0.999, 1e-8
SHAPES = [(69, 2), (69, 23), (69,), (69,), (2, 23), (2,), (300000,)]


def scalars(t, lr=LR):
    bc1 = 1 - B1 ** float(t)
    bc2 = 1 - B2 ** float(t)
    return (1 - lr * WD, bc2 ** 0.5, (lr / bc1) * -1)


def variant_step(kind, params, grads, m, v, sc, ones):
    wd, bc2s, ss = sc[0], sc[1], sc[2]
    torch._foreach_mul_(params, wd)
    torch._foreach_lerp_(m, grads, 1 - B1)
    torch._foreach_mul_(v, B2)
    torch._foreach_addcmul_(v, grads, grads, 1 - B2)
    d = torch._foreach_sqrt(v)
    torch._foreach_div_(d, bc2s)
    torch._foreach_add_(d, EPS)
    q = torch._foreach_div(m, d)
    if kind == "ones*s + foreach addcmul":
        s_full = torch._foreach_mul(ones, ss)
        torch._foreach_addcmul_(params, q, s_full)
    elif kind == "per-param addcmul":
        for p, qi in zip(params, q):
            p.addcmul_(ss, qi)
    elif kind == "mul then add (control, no fma)":
        torch._foreach_mul_(q, ss)
        torch._foreach_add_(params, q)


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for kind in ("ones*s + foreach addcmul", "per-param addcmul", "mul then add (control, no fma)"):
        g = torch.Generator(device=dev).manual_seed(0)
        p0 = [(torch.rand(s, device=dev, generator=g) - 0.5) * 0.02 for s in SHAPES]
        pa = [p.clone() for p in p0]
        pb = [p.clone() for p in p0]
        ma, va = [torch.zeros_like(p) for p in p0], [torch.zeros_like(p) for p in p0]
        mb, vb = [torch.zeros_like(p) for p in p0], [torch.zeros_like(p) for p in p0]
        steps = [torch.tensor(0.0) for _ in p0]
        ones = [torch.ones_like(p) for p in p0]
        ok = True
        for t in range(1, 8):
            grads = [torch.randn(s, device=dev, generator=g) * 10 ** float(torch.randint(-3, 1, (1,))) for s in SHAPES]
            adam._multi_tensor_adam(pa, grads, ma, va, [], steps, None, None, amsgrad=False, has_complex=False,
                                    beta1=B1, beta2=B2, lr=LR, weight_decay=WD, eps=EPS, maximize=False,
                                    capturable=False, differentiable=False, decoupled_weight_decay=True)
            sc = torch.tensor(scalars(t), dtype=torch.float32, device=dev)
            variant_step(kind, pb, grads, mb, vb, sc, ones)
            eq = all(torch.equal(a, b) for a, b in zip(pa + ma + va, pb + mb + vb))
            ndiff = sum(int((a != b).sum()) for a, b in zip(pa, pb))
            ok = ok and eq
            if not eq:
                print(f"  {kind}: step {t}: {ndiff} parameter elements differ")
                break
        print(f"{kind}: bitwise equal over 7 steps: {ok}")

    # per-step GPU time of the GRU-23 parameter set: eager foreach AdamW vs the in-graph formulation
    shapes = SHAPES[:-1]
    ps = [torch.zeros(s, device=dev) for s in shapes]
    gs = [torch.randn(s, device=dev) for s in shapes]
    m, v = [torch.zeros_like(p) for p in ps], [torch.zeros_like(p) for p in ps]
    steps = [torch.tensor(0.0) for _ in ps]
    ones = [torch.ones_like(p) for p in ps]
    table = torch.tensor([scalars(t) for t in range(1, 5001)], dtype=torch.float32, device=dev)
    c = torch.zeros(1, dtype=torch.int64, device=dev)

    def graphed():
        sc = table.index_select(0, c)[0]
        variant_step("ones*s + foreach addcmul", ps, gs, m, v, sc, ones)
        c.add_(1)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graphed()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed()
    for label, fn in (("eager foreach AdamW (host-timed)", lambda: adam._multi_tensor_adam(
            ps, gs, m, v, [], steps, None, None, amsgrad=False, has_complex=False, beta1=B1, beta2=B2, lr=LR,
            weight_decay=WD, eps=EPS, maximize=False, capturable=False, differentiable=False,
            decoupled_weight_decay=True)), ("in-graph formulation (replay)", graph.replay)):
        for _ in range(50):
            fn()
        c.zero_()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        c.zero_()
        print(f"{label}: {(time.perf_counter() - t0) / 2000 * 1e6:.1f} µs per step")


if __name__ == "__main__":
    main()
