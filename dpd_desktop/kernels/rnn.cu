// Fused GRU / LSTM recurrences (forward and reverse-time backward), float32, batch first.
// Compiled at run time by dpd_desktop/kernels/nvrtc.py with -DHID=<hidden size, 1..64> -DKS=<1|2|4> --ftz=true.
//
// Design: one block per batch row. Thread = (hidden unit j, k-slice s): each unit's matrix-vector products over k
// (forward: W_hh h; backward: W_hh^T dgh) are split into KS slices of KW terms, one slice per thread, the slice's
// recurrent weights in registers, the partial sums added across the unit's KS threads by warp shuffles (xor tree:
// every thread of a unit gets the bitwise same sum, so all of them compute the gates redundantly and stay equal).
// A warp holds 32 / KS units; NW = ceil(H / (32 / KS)) warps per block (one warp up to 32 / KS units: a __syncwarp
// per step, else one block barrier per step). The hidden state (forward) or the gate gradients (backward) go through
// a shared buffer, double-buffered by step parity so that one barrier per step suffices, read as float4 broadcasts.
// The per-step inputs (gi, saved gates) are loaded PF steps ahead into a register ring indexed by compile-time slots
// (the time loop is unrolled by PF), so no load waits on the step before. For the autograd Functions (gru_fwd,
// gru_bwd, lstm_*) the input projection x W_ih^T + b_ih and every weight gradient are GEMMs outside (cuda_rnn.py);
// the fused step's model-indexed kernels (gru_fwd_m, gru_bwd_m: training/fused_step.py) compute the projection on the
// fly and sum each batch row's weight gradients inside the reverse recurrence. No atomics: each output element is
// written by one thread in a fixed order, so results are bitwise reproducible (eager and CUDA-graph runs alike).
//
// Gate equations are PyTorch's (torch.nn.GRU / torch.nn.LSTM documentation):
//   GRU:  r = s(gi_r + gh_r), z = s(gi_z + gh_z), n = tanh(gi_n + r * gh_n), h' = (1 - z) n + z h,
//         gi = W_ih x + b_ih, gh = W_hh h + b_hh (rows r, z, n).
//   LSTM: i, f, o = s(.), g = tanh(.) of gi + gh (rows i, f, g, o); c' = f c + i g; h' = o tanh(c').

#ifndef HID
#error "HID (hidden size) must be defined"
#endif
#ifndef KS
#define KS 1
#endif

#define H HID
#define UPW (32 / KS)                            // hidden units per warp
#define NW ((H + UPW - 1) / UPW)                 // warps per block (one block per batch row)
#define NT (32 * NW)                             // threads per block
#define KW ((((H + KS - 1) / KS) + 3) / 4 * 4)   // k (forward) or j (backward) terms per slice, a multiple of 4
#define KSTR (KS > 1 ? KW + 4 : KW)              // slice stride in the shared buffers (distinct banks per slice)
#define HB (KS * KSTR)                           // floats of one gate's vector in a shared buffer
#define PF 4                                     // prefetch depth (steps), even: the buffer parity is the slot's

// __expf / __fdividef (MUFU.EX2, MUFU.RCP): a few ulp each (CUDA C++ Programming Guide, intrinsic functions), far
// below the 1e-5 the tests hold the kernels to. __fdividef(c, inf) = 0, so both saturate cleanly for large |x|.
__device__ __forceinline__ float sigm(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
__device__ __forceinline__ float tanh_(float x) { return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * x)); }

__device__ __forceinline__ float f4(const float4& v, int e) {
    return e == 0 ? v.x : (e == 1 ? v.y : (e == 2 ? v.z : v.w));
}

__device__ __forceinline__ void step_barrier() {
#if NW == 1
    __syncwarp();
#else
    __syncthreads();
#endif
}

// The sum over a unit's KS slices (lanes j, j + UPW, ...): an xor tree, the same bits on every lane of the unit.
__device__ __forceinline__ float slice_sum(float v) {
#pragma unroll
    for (int off = UPW; off < 32; off *= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

struct Thread {
    int j;       // hidden unit
    int s;       // k-slice
    bool valid;  // j < H
    bool writer; // valid and slice 0: the one thread that stores this unit's outputs
    int pos;     // this unit's place in the shared buffers (slice j / KW, offset j % KW)
};

__device__ __forceinline__ Thread thread_of() {
    Thread th;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    th.s = lane / UPW;
    th.j = w * UPW + lane % UPW;
    th.valid = th.j < H;
    th.writer = th.valid && th.s == 0;
    th.pos = (th.j / KW) * KSTR + th.j % KW;
    return th;
}

// Zero the shared buffers (their padding is read as 0 and never written), then the first barrier.
__device__ __forceinline__ void zero_shared(float* buf, int n) {
    for (int i = threadIdx.x; i < n; i += NT) buf[i] = 0.0f;
    __syncthreads();
}

// Forward weights: w[g][kk] = W_hh[g*H + j][s*KW + kk] (0 outside the matrix).
template <int G>
__device__ __forceinline__ void load_w_fwd(float (&w)[G][KW], const float* __restrict__ w_hh, const Thread& th) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int kk = 0; kk < KW; ++kk) {
            const int k = th.s * KW + kk;
            w[g][kk] = (th.valid && k < H) ? w_hh[(g * H + th.j) * H + k] : 0.0f;
        }
}

// Backward weights: w[g][jj] = W_hh[g*H + s*KW + jj][j] (the transpose's slice; 0 outside the matrix).
template <int G>
__device__ __forceinline__ void load_w_bwd(float (&w)[G][KW], const float* __restrict__ w_hh, const Thread& th) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int jj = 0; jj < KW; ++jj) {
            const int jr = th.s * KW + jj;
            w[g][jj] = (th.valid && jr < H) ? w_hh[(g * H + jr) * H + th.j] : 0.0f;
        }
}

// acc[g] = init[g] + sum_kk w[g][kk] * hs[kk] over this slice, then summed over the unit's slices; four partial
// sums per gate (kk mod 4) shorten the dependent FMA chain. hs: this slice's KW floats, 16-byte aligned.
template <int G>
__device__ __forceinline__ void matvec_fwd(float (&acc)[G], const float (&w)[G][KW], const float* hs,
                                           const float (&init)[G]) {
    float p[G][4];
#pragma unroll
    for (int g = 0; g < G; ++g) {
        p[g][0] = init[g];
        p[g][1] = p[g][2] = p[g][3] = 0.0f;
    }
#pragma unroll
    for (int k4 = 0; k4 < KW / 4; ++k4) {
        const float4 v = reinterpret_cast<const float4*>(hs)[k4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int kk = 4 * k4 + e;
            if (KS > 1 || kk < H) {  // one slice: the padding terms are known zeros, skip them
                const float hv = f4(v, e);
#pragma unroll
                for (int g = 0; g < G; ++g) p[g][e] = fmaf(w[g][kk], hv, p[g][e]);
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = slice_sum((p[g][0] + p[g][1]) + (p[g][2] + p[g][3]));
}

// init + sum_g sum_jj w[g][jj] * ds[g*HB + jj] over this slice, then summed over the unit's slices; eight partial
// sums ((g mod 2, jj mod 4)). ds: this slice's start in gate 0's vector, 16-byte aligned.
template <int G>
__device__ __forceinline__ float matvec_bwd(const float (&w)[G][KW], const float* ds, float init) {
    float p[8];
    p[0] = init;
#pragma unroll
    for (int q = 1; q < 8; ++q) p[q] = 0.0f;
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
        for (int j4 = 0; j4 < KW / 4; ++j4) {
            const float4 v = reinterpret_cast<const float4*>(ds + g * HB)[j4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int jj = 4 * j4 + e;
                if (KS > 1 || jj < H) p[(g & 1) * 4 + e] = fmaf(w[g][jj], f4(v, e), p[(g & 1) * 4 + e]);
            }
        }
    return slice_sum(((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])));
}

// ------------------------------------------------------------------------------------------------ GRU
// gi (B,T,3H) = x W_ih^T + b_ih; w_hh (3H,H); b_hh (3H) or null; h0 (B,H) -> y (B,T,H);
// save (B,T,5H) = [r, z, n, W_hn h + b_hn, h_{t-1}] per step, or null (no backward).
// The fused step's input projection (FROM_X): gi of step t from the series sample s0 + t, gi = W_ih x + b_ih.
struct FromX {
    const float* x;   // series (N, 2)
    long long s0;     // the frame's first sample
    const float* w_ih;  // (3H, 2)
    const float* b_ih;  // (3H)
    float* xg;        // the frame's inputs (T, 2), stored for the weight gradients
};

// One block's batch row b (h0 null: zeros). gi, y, save: the row's own model's tensors. FROM_X: gi is computed
// from fx (the fused step, training/fused_step.py) instead of read.
template <bool FROM_X>
__device__ __forceinline__ void gru_fwd_row(const int b, const float* __restrict__ gi, const float* __restrict__ w_hh,
                                            const float* __restrict__ b_hh, const float* __restrict__ h0,
                                            float* __restrict__ y, float* __restrict__ save, const int T,
                                            const FromX fx) {
    constexpr int G = 3;
    const Thread th = thread_of();
    const int j = th.j;
    __shared__ __align__(16) float hbuf[2][HB];
    zero_shared(&hbuf[0][0], 2 * HB);
    float w[G][KW];
    load_w_fwd<G>(w, w_hh, th);
    float bias[G];
#pragma unroll
    for (int g = 0; g < G; ++g) bias[g] = (b_hh != nullptr && th.writer) ? b_hh[g * H + j] : 0.0f;
    float h = (th.valid && h0 != nullptr) ? h0[(size_t)b * H + j] : 0.0f;
    const float* gib = gi + (size_t)b * T * G * H;
    float* yb = y + (size_t)b * T * H;
    float* sb = save ? save + (size_t)b * T * 5 * H : nullptr;
    float wi[G][2], bi[G];
    if (FROM_X) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            wi[g][0] = th.valid ? fx.w_ih[(g * H + j) * 2] : 0.0f;
            wi[g][1] = th.valid ? fx.w_ih[(g * H + j) * 2 + 1] : 0.0f;
            bi[g] = th.valid ? fx.b_ih[g * H + j] : 0.0f;
        }
    }
    float p[PF][G];
#define GRU_FWD_LOAD(slot, tt)                                                                                      \
    if (FROM_X) {                                                                                                   \
        const bool ok = (tt) < T;                                                                                   \
        const float2 xv = ok ? reinterpret_cast<const float2*>(fx.x)[fx.s0 + (tt)] : make_float2(0.0f, 0.0f);     \
        _Pragma("unroll") for (int g = 0; g < G; ++g) p[slot][g] = fmaf(wi[g][1], xv.y, fmaf(wi[g][0], xv.x, bi[g])); \
        if (ok && threadIdx.x == 0) reinterpret_cast<float2*>(fx.xg)[(size_t)b * T + (tt)] = xv;                  \
    } else {                                                                                                        \
        _Pragma("unroll") for (int g = 0; g < G; ++g)                                                               \
            p[slot][g] = (th.valid && (tt) < T) ? gib[(size_t)(tt) * G * H + g * H + j] : 0.0f;                     \
    }
#pragma unroll
    for (int d = 0; d < PF; ++d) GRU_FWD_LOAD(d, d)
    for (int t0 = 0; t0 < T; t0 += PF) {
#pragma unroll
        for (int d = 0; d < PF; ++d) {
            const int t = t0 + d;
            if (t >= T) break;
            float* hb = hbuf[d & 1];
            if (th.writer) hb[th.pos] = h;
            step_barrier();
            float a[G];
            matvec_fwd<G>(a, w, hb + th.s * KSTR, bias);
            const float r = sigm(p[d][0] + a[0]);
            const float z = sigm(p[d][1] + a[1]);
            const float n = tanh_(fmaf(r, a[2], p[d][2]));
            const float hn = (1.0f - z) * n + z * h;
            if (th.writer) {
                yb[(size_t)t * H + j] = hn;
                if (sb) {
                    float* s = sb + (size_t)t * 5 * H;
                    s[j] = r;
                    s[H + j] = z;
                    s[2 * H + j] = n;
                    s[3 * H + j] = a[2];
                    s[4 * H + j] = h;
                }
            }
            h = hn;
            GRU_FWD_LOAD(d, t + PF)
        }
    }
#undef GRU_FWD_LOAD
}

// dy (B,T,H); w_hh (3H,H); save from gru_fwd -> dgi (B,T,3H) = dL/d(gi), dgh (B,T,3H) = dL/d(gh), dh0 (B,H).
// One block's batch row b (dh0 null: not stored). ACC (the fused step): instead of storing dgi and dgh, the row's
// weight gradients are summed over its steps (reverse time order) and stored to part (3H, H + 4): per gate row g
// [dW_hh[g][0..H-1], db_hh[g], dW_ih[g][0], dW_ih[g][1], db_ih[g]], from xg (T, 2), the row's inputs. DU (a DPD's
// frozen PA in the fused step): instead of dgi and dgh, the input gradient's partials dL/dx = dgi W_ih (w_ih (3H, 2))
// summed over each warp's units (an xor tree): dup (B, T, NW) float2, warp w's sum over its units.
template <bool ACC, bool DU = false>
__device__ __forceinline__ void gru_bwd_row(const int b, const float* __restrict__ dy, const float* __restrict__ w_hh,
                                            const float* __restrict__ save, float* __restrict__ dgi,
                                            float* __restrict__ dgh, float* __restrict__ dh0, const int T,
                                            const float* __restrict__ xg, float* __restrict__ part,
                                            const float* __restrict__ w_ih = nullptr,
                                            float* __restrict__ dup = nullptr) {
    constexpr int G = 3;
    const Thread th = thread_of();
    const int j = th.j;
    __shared__ __align__(16) float dbuf[2][G * HB];
    __shared__ __align__(16) float hpbuf[ACC ? 2 : 1][ACC ? HB : 4];
    zero_shared(&dbuf[0][0], 2 * G * HB);
    if (ACC) zero_shared(&hpbuf[0][0], 2 * HB);
    float w[G][KW];
    load_w_bwd<G>(w, w_hh, th);
    float acc[ACC ? G : 1][ACC ? KW : 1];
    float ab[G], ai[G], ax[G][2];
    if (ACC) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            ab[g] = ai[g] = ax[g][0] = ax[g][1] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KW; ++kk) acc[g][kk] = 0.0f;
        }
    }
    float wu[G][2];  // DU: this unit's rows of W_ih
#pragma unroll
    for (int g = 0; g < G; ++g) {
        wu[g][0] = (DU && th.valid) ? w_ih[(g * H + j) * 2] : 0.0f;
        wu[g][1] = (DU && th.valid) ? w_ih[(g * H + j) * 2 + 1] : 0.0f;
    }
    const float* dyb = dy + (size_t)b * T * H;
    const float* sb = save + (size_t)b * T * 5 * H;
    float* dgib = (ACC || DU) ? nullptr : dgi + (size_t)b * T * G * H;
    float* dghb = (ACC || DU) ? nullptr : dgh + (size_t)b * T * G * H;
    // per step: dy, r, z, n, W_hn h + b_hn, h_{t-1} (and with ACC the step's input x)
    float q[PF][ACC ? 8 : 6];
#define GRU_BWD_LOAD(slot, t)                                                                                       \
    {                                                                                                               \
        const bool ok = th.valid && (t) >= 0;                                                                       \
        const float* s = sb + (size_t)((t) >= 0 ? (t) : 0) * 5 * H;                                                 \
        q[slot][0] = ok ? dyb[(size_t)((t) >= 0 ? (t) : 0) * H + j] : 0.0f;                                         \
        _Pragma("unroll") for (int e = 0; e < 5; ++e) q[slot][1 + e] = ok ? s[e * H + j] : 0.0f;                    \
        if (ACC) {                                                                                                  \
            const float2 xv = ok ? reinterpret_cast<const float2*>(xg)[(t) >= 0 ? (t) : 0] : make_float2(0.f, 0.f); \
            q[slot][ACC ? 6 : 0] = xv.x;                                                                            \
            q[slot][ACC ? 7 : 0] = xv.y;                                                                            \
        }                                                                                                           \
    }
#pragma unroll
    for (int d = 0; d < PF; ++d) GRU_BWD_LOAD(d, T - 1 - d)
    float dhc = 0.0f;
    for (int t0 = 0; t0 < T; t0 += PF) {
#pragma unroll
        for (int d = 0; d < PF; ++d) {
            const int t = T - 1 - (t0 + d);
            if (t < 0) break;
            float* db = dbuf[d & 1];
            const float dh = q[d][0] + dhc;
            const float r = q[d][1], z = q[d][2], n = q[d][3], hn = q[d][4], hp = q[d][5];
            const float dn = dh * (1.0f - z);
            const float dz = dh * (hp - n);
            const float dan = dn * (1.0f - n * n);
            const float dhn = dan * r;
            const float dar = dan * hn * r * (1.0f - r);
            const float daz = dz * z * (1.0f - z);
            if (th.writer) {
                if (!ACC && !DU) {
                    float* gi_t = dgib + (size_t)t * G * H;
                    float* gh_t = dghb + (size_t)t * G * H;
                    gi_t[j] = dar;
                    gi_t[H + j] = daz;
                    gi_t[2 * H + j] = dan;
                    gh_t[j] = dar;
                    gh_t[H + j] = daz;
                    gh_t[2 * H + j] = dhn;
                } else if (ACC) {
                    hpbuf[d & 1][th.pos] = hp;
                }
                db[th.pos] = dar;
                db[HB + th.pos] = daz;
                db[2 * HB + th.pos] = dhn;
            }
            step_barrier();
            const float acc_h = matvec_bwd<G>(w, db + th.s * KSTR, th.s == 0 ? dh * z : 0.0f);
            if (DU) {  // off the recurrence's critical path: every slice holds its unit's gate gradients
                float u0 = fmaf(dan, wu[2][0], fmaf(daz, wu[1][0], dar * wu[0][0]));
                float u1 = fmaf(dan, wu[2][1], fmaf(daz, wu[1][1], dar * wu[0][1]));
#pragma unroll
                for (int off = 1; off < UPW; off *= 2) {
                    u0 += __shfl_xor_sync(0xffffffffu, u0, off);
                    u1 += __shfl_xor_sync(0xffffffffu, u1, off);
                }
                if ((threadIdx.x & 31) == 0)
                    reinterpret_cast<float2*>(dup)[((size_t)b * T + t) * NW + (threadIdx.x >> 5)] = make_float2(u0, u1);
            }
            if (ACC) {  // this step's weight-gradient terms, off the recurrence's critical path
                const float dg[G] = {dar, daz, dhn};
                const float* hs = &hpbuf[d & 1][0] + th.s * KSTR;
#pragma unroll
                for (int k4 = 0; k4 < KW / 4; ++k4) {
                    const float4 v = reinterpret_cast<const float4*>(hs)[k4];
#pragma unroll
                    for (int e = 0; e < 4; ++e)
#pragma unroll
                        for (int g = 0; g < G; ++g) acc[g][4 * k4 + e] = fmaf(dg[g], f4(v, e), acc[g][4 * k4 + e]);
                }
                const float di[G] = {dar, daz, dan};
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    ab[g] += dg[g];
                    ai[g] += di[g];
                    ax[g][0] = fmaf(di[g], q[d][ACC ? 6 : 0], ax[g][0]);
                    ax[g][1] = fmaf(di[g], q[d][ACC ? 7 : 0], ax[g][1]);
                }
            }
            dhc = th.valid ? acc_h : 0.0f;
            GRU_BWD_LOAD(d, t - PF)
        }
    }
#undef GRU_BWD_LOAD
    if (th.writer && dh0 != nullptr) dh0[(size_t)b * H + j] = dhc;
    if (ACC && th.valid) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
            float* out = part + (size_t)(g * H + j) * (H + 4);
#pragma unroll
            for (int kk = 0; kk < KW; ++kk) {
                const int k = th.s * KW + kk;
                if (k < H) out[k] = acc[g][kk];
            }
            if (th.s == 0) {
                out[H] = ab[g];
                out[H + 1] = ax[g][0];
                out[H + 2] = ax[g][1];
                out[H + 3] = ai[g];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NT)
gru_fwd(const float* __restrict__ gi, const float* __restrict__ w_hh, const float* __restrict__ b_hh,
        const float* __restrict__ h0, float* __restrict__ y, float* __restrict__ save, int B, int T) {
    if ((int)blockIdx.x >= B) return;
    gru_fwd_row<false>(blockIdx.x, gi, w_hh, b_hh, h0, y, save, T, FromX{});
}

extern "C" __global__ void __launch_bounds__(NT)
gru_bwd(const float* __restrict__ dy, const float* __restrict__ w_hh, const float* __restrict__ save,
        float* __restrict__ dgi, float* __restrict__ dgh, float* __restrict__ dh0, int B, int T) {
    if ((int)blockIdx.x >= B) return;
    gru_bwd_row<false>(blockIdx.x, dy, w_hh, save, dgi, dgh, dh0, T, nullptr, nullptr);
}

// Model-indexed (training/fused_step.py): block (b, m) runs batch row b of model m, whose tensors are entries of row
// m of the pointer table ptrs (NPTR pointers per model, kernels/gru_step.cu's P_* layout); y, save, xg, dy are
// stacked (M, B, T, ·) buffers and part_w (M, B, 3H, H + 4) the weight-gradient partials; h0 = 0. The forward
// gathers its frame itself: frame perm[counter * B + b] of the model's epoch permutation, gi = W_ih x + b_ih on the
// fly (the inputs kept in xg for the weight gradients).
#define NPTR 32
#define PW_IH 0
#define PW_HH 1
#define PB_IH 2
#define PB_HH 3
#define PX 24
#define PPERM 26
#define PCOUNTER 27
extern "C" __global__ void __launch_bounds__(NT)
gru_fwd_m(const unsigned long long* __restrict__ ptrs, float* __restrict__ xg, float* __restrict__ y,
          float* __restrict__ save, int B, int T, int stride) {
    if ((int)blockIdx.x >= B) return;
    const size_t m = blockIdx.y, rows = (size_t)B * T;
    const unsigned long long* row = ptrs + m * NPTR;
    const long long cnt = *reinterpret_cast<const long long*>(row[PCOUNTER]);
    const long long frame = reinterpret_cast<const long long*>(row[PPERM])[cnt * B + blockIdx.x];
    const FromX fx{reinterpret_cast<const float*>(row[PX]), frame * stride, reinterpret_cast<const float*>(row[PW_IH]),
                   reinterpret_cast<const float*>(row[PB_IH]), xg + m * rows * 2};
    gru_fwd_row<true>(blockIdx.x, nullptr, reinterpret_cast<const float*>(row[PW_HH]),
                      reinterpret_cast<const float*>(row[PB_HH]), nullptr, y + m * rows * H, save + m * rows * 5 * H,
                      T, fx);
}

extern "C" __global__ void __launch_bounds__(NT)
gru_bwd_m(const unsigned long long* __restrict__ ptrs, const float* __restrict__ dy, const float* __restrict__ save,
          const float* __restrict__ xg, float* __restrict__ part_w, int B, int T) {
    if ((int)blockIdx.x >= B) return;
    const size_t m = blockIdx.y, rows = (size_t)B * T, b = blockIdx.x;
    const float* w_hh = reinterpret_cast<const float*>(ptrs[m * NPTR + PW_HH]);
    gru_bwd_row<true>(blockIdx.x, dy + m * rows * H, w_hh, save + m * rows * 5 * H, nullptr, nullptr, nullptr, T,
                      xg + (m * rows + b * T) * 2, part_w + (m * B + b) * (size_t)(3 * H) * (H + 4));
}

// A DPD's frozen PA (training/fused_step.py): the reverse-time recurrence of model m's batch row b giving only the
// partials of its input gradient, dup (M, B, T, NW) float2 (gru_bwd_row's DU; gru_step.cu head_bwd sums a row's NW
// in order: the DPD's dL/du); no weight gradients.
extern "C" __global__ void __launch_bounds__(NT)
gru_bwd_du_m(const unsigned long long* __restrict__ ptrs, const float* __restrict__ dy,
             const float* __restrict__ save, float* __restrict__ dup, int B, int T) {
    if ((int)blockIdx.x >= B) return;
    const size_t m = blockIdx.y, rows = (size_t)B * T;
    const float* w_hh = reinterpret_cast<const float*>(ptrs[m * NPTR + PW_HH]);
    const float* w_ih = reinterpret_cast<const float*>(ptrs[m * NPTR + PW_IH]);
    gru_bwd_row<false, true>(blockIdx.x, dy + m * rows * H, w_hh, save + m * rows * 5 * H, nullptr, nullptr, nullptr,
                             T, nullptr, nullptr, w_ih, dup + m * rows * NW * 2);
}

// ------------------------------------------------------------------------------------------------ LSTM
// gi (B,T,4H) = x W_ih^T + b_ih; w_hh (4H,H); b_hh (4H) or null; h0, c0 (B,H) -> y (B,T,H);
// save (B,T,6H) = [i, f, g, o, c_t, h_{t-1}] per step, or null.
extern "C" __global__ void __launch_bounds__(NT)
lstm_fwd(const float* __restrict__ gi, const float* __restrict__ w_hh, const float* __restrict__ b_hh,
         const float* __restrict__ h0, const float* __restrict__ c0, float* __restrict__ y,
         float* __restrict__ save, int B, int T) {
    constexpr int G = 4;
    const int b = blockIdx.x;
    if (b >= B) return;
    const Thread th = thread_of();
    const int j = th.j;
    __shared__ __align__(16) float hbuf[2][HB];
    zero_shared(&hbuf[0][0], 2 * HB);
    float w[G][KW];
    load_w_fwd<G>(w, w_hh, th);
    float bias[G];
#pragma unroll
    for (int g = 0; g < G; ++g) bias[g] = (b_hh != nullptr && th.writer) ? b_hh[g * H + j] : 0.0f;
    float h = th.valid ? h0[(size_t)b * H + j] : 0.0f;
    float c = th.valid ? c0[(size_t)b * H + j] : 0.0f;
    const float* gib = gi + (size_t)b * T * G * H;
    float* yb = y + (size_t)b * T * H;
    float* sb = save ? save + (size_t)b * T * 6 * H : nullptr;
    float p[PF][G];
#pragma unroll
    for (int d = 0; d < PF; ++d)
#pragma unroll
        for (int g = 0; g < G; ++g) p[d][g] = (th.valid && d < T) ? gib[(size_t)d * G * H + g * H + j] : 0.0f;
    for (int t0 = 0; t0 < T; t0 += PF) {
#pragma unroll
        for (int d = 0; d < PF; ++d) {
            const int t = t0 + d;
            if (t >= T) break;
            float* hb = hbuf[d & 1];
            if (th.writer) hb[th.pos] = h;
            step_barrier();
            float a[G];
            matvec_fwd<G>(a, w, hb + th.s * KSTR, bias);
            const float ig = sigm(p[d][0] + a[0]);
            const float fg = sigm(p[d][1] + a[1]);
            const float gg = tanh_(p[d][2] + a[2]);
            const float og = sigm(p[d][3] + a[3]);
            const float cn = fg * c + ig * gg;
            const float hn = og * tanh_(cn);
            if (th.writer) {
                yb[(size_t)t * H + j] = hn;
                if (sb) {
                    float* s = sb + (size_t)t * 6 * H;
                    s[j] = ig;
                    s[H + j] = fg;
                    s[2 * H + j] = gg;
                    s[3 * H + j] = og;
                    s[4 * H + j] = cn;
                    s[5 * H + j] = h;
                }
            }
            h = hn;
            c = cn;
            const int tn = t + PF;
#pragma unroll
            for (int g = 0; g < G; ++g) p[d][g] = (th.valid && tn < T) ? gib[(size_t)tn * G * H + g * H + j] : 0.0f;
        }
    }
}

// dy (B,T,H); w_hh (4H,H); c0 (B,H); save from lstm_fwd -> da (B,T,4H) = dL/d(gi) = dL/d(gh), dh0, dc0 (B,H).
extern "C" __global__ void __launch_bounds__(NT)
lstm_bwd(const float* __restrict__ dy, const float* __restrict__ w_hh, const float* __restrict__ c0,
         const float* __restrict__ save, float* __restrict__ da, float* __restrict__ dh0,
         float* __restrict__ dc0, int B, int T) {
    constexpr int G = 4;
    const int b = blockIdx.x;
    if (b >= B) return;
    const Thread th = thread_of();
    const int j = th.j;
    __shared__ __align__(16) float dbuf[2][G * HB];
    zero_shared(&dbuf[0][0], 2 * G * HB);
    float w[G][KW];
    load_w_bwd<G>(w, w_hh, th);
    const float* dyb = dy + (size_t)b * T * H;
    const float* sb = save + (size_t)b * T * 6 * H;
    float* dab = da + (size_t)b * T * G * H;
    // per step: dy, i, f, g, o, c_t, c_{t-1}
    float q[PF][7];
#define LSTM_BWD_LOAD(slot, t)                                                                                      \
    {                                                                                                               \
        const bool ok = th.valid && (t) >= 0;                                                                       \
        const float* s = sb + (size_t)((t) >= 0 ? (t) : 0) * 6 * H;                                                 \
        q[slot][0] = ok ? dyb[(size_t)((t) >= 0 ? (t) : 0) * H + j] : 0.0f;                                         \
        _Pragma("unroll") for (int e = 0; e < 5; ++e) q[slot][1 + e] = ok ? s[e * H + j] : 0.0f;                    \
        q[slot][6] = ok ? ((t) > 0 ? s[4 * H + j - 6 * H] : c0[(size_t)b * H + j]) : 0.0f;                          \
    }
#pragma unroll
    for (int d = 0; d < PF; ++d) LSTM_BWD_LOAD(d, T - 1 - d)
    float dhc = 0.0f, dcc = 0.0f;
    for (int t0 = 0; t0 < T; t0 += PF) {
#pragma unroll
        for (int d = 0; d < PF; ++d) {
            const int t = T - 1 - (t0 + d);
            if (t < 0) break;
            float* db = dbuf[d & 1];
            const float dh = q[d][0] + dhc;
            const float ig = q[d][1], fg = q[d][2], gg = q[d][3], og = q[d][4], cn = q[d][5], cp = q[d][6];
            const float tc = tanh_(cn);
            const float dc = dcc + dh * og * (1.0f - tc * tc);
            const float dai = dc * gg * ig * (1.0f - ig);
            const float daf = dc * cp * fg * (1.0f - fg);
            const float dag = dc * ig * (1.0f - gg * gg);
            const float dao = dh * tc * og * (1.0f - og);
            dcc = dc * fg;
            if (th.writer) {
                float* a_t = dab + (size_t)t * G * H;
                a_t[j] = dai;
                a_t[H + j] = daf;
                a_t[2 * H + j] = dag;
                a_t[3 * H + j] = dao;
                db[th.pos] = dai;
                db[HB + th.pos] = daf;
                db[2 * HB + th.pos] = dag;
                db[3 * HB + th.pos] = dao;
            }
            step_barrier();
            const float acc = matvec_bwd<G>(w, db + th.s * KSTR, 0.0f);
            dhc = th.valid ? acc : 0.0f;
            LSTM_BWD_LOAD(d, t - PF)
        }
    }
#undef LSTM_BWD_LOAD
    if (th.writer) {
        dh0[(size_t)b * H + j] = dhc;
        dc0[(size_t)b * H + j] = dcc;
    }
}
