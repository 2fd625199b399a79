// Fused GRU / LSTM recurrences (forward and reverse-time backward), float32, batch first.
// Compiled at run time by dpd_desktop/kernels/nvrtc.py with -DHID=<hidden size, 1..64> -DSMEM_W=<0|1>.
//
// Design (issue 14's probe): one warp per batch row (one block of 32 threads), lane = hidden unit (two units per
// lane above 32), the recurrent weights in registers (SMEM_W=0) or in shared memory (SMEM_W=1, hidden > 32), the
// hidden state (forward) or the gate gradients (backward) broadcast through a per-warp shared buffer read as float4
// (double-buffered by step parity: one __syncwarp per step). The input projection x W_ih^T + b_ih and every weight
// gradient are GEMMs outside (cuda_rnn.py). No atomics: each output element is written by one lane in a fixed order,
// so results are bitwise reproducible (eager and CUDA-graph runs alike).
//
// Gate equations are PyTorch's (torch.nn.GRU / torch.nn.LSTM documentation):
//   GRU:  r = s(gi_r + gh_r), z = s(gi_z + gh_z), n = tanh(gi_n + r * gh_n), h' = (1 - z) n + z h,
//         gi = W_ih x + b_ih, gh = W_hh h + b_hh (rows r, z, n).
//   LSTM: i, f, o = s(.), g = tanh(.) of gi + gh (rows i, f, g, o); c' = f c + i g; h' = o tanh(c').

#ifndef HID
#error "HID (hidden size) must be defined"
#endif
#ifndef SMEM_W
#define SMEM_W 0
#endif

#define H HID
#define UPL ((H + 31) / 32)      // hidden units per lane
#define HP (((H) + 3) / 4 * 4)   // H padded to a multiple of 4 (float4 broadcast reads)

// __expf / __fdividef (MUFU.EX2, MUFU.RCP): a few ulp each (CUDA C++ Programming Guide, intrinsic functions), far
// below the 1e-5 the tests hold the kernels to, and a shorter dependent chain per time step than expf / IEEE division.
// __fdividef(c, inf) = 0, so both saturate cleanly for large |x|.
__device__ __forceinline__ float sigm(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
__device__ __forceinline__ float tanh_(float x) { return 1.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * x)); }

__device__ __forceinline__ float f4(const float4& v, int e) {
    return e == 0 ? v.x : (e == 1 ? v.y : (e == 2 ? v.z : v.w));
}

// ------------------------------------------------------------------------------------------------ weight access
// Forward: lane needs W_hh[g*H + j][k] for its units j and every k.  Backward: lane needs W_hh[g*H + j][k] for its
// output units k and every j (the product W_hh^T dgh).
#if SMEM_W
// forward layout: sw[k * SWS + g*H + j], SWS = G*H rounded up to odd (lanes read consecutive j, and the transposing
// stores of consecutive k fall in distinct banks); backward: natural sw[row*H + k]. Dynamic size H * SWS floats.
#define SWS(G) ((G * H) | 1)
#define LOAD_W_FWD(G)                                                                                               \
    extern __shared__ float sw[];                                                                                   \
    _Pragma("unroll 8") for (int i = threadIdx.x; i < G * H * H; i += 32) {                                         \
        int row = i / H, k = i - row * H;                                                                           \
        sw[k * SWS(G) + row] = w_hh[i];                                                                             \
    }                                                                                                               \
    __syncthreads();                                                                                                \
    int jc[UPL];                                                                                                    \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) jc[u] = min(lane + 32 * u, H - 1);
#define WF(G, u, g, k) sw[(k) * SWS(G) + (g) * H + jc[u]]
#define LOAD_W_BWD(G)                                                                                               \
    extern __shared__ float sw[];                                                                                   \
    _Pragma("unroll 8") for (int i = threadIdx.x; i < G * H * H; i += 32) sw[i] = w_hh[i];                          \
    __syncthreads();                                                                                                \
    int kc[UPL];                                                                                                    \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) kc[u] = min(lane + 32 * u, H - 1);
#define WB(G, u, g, j) sw[((g) * H + (j)) * H + kc[u]]
#else
#define LOAD_W_FWD(G)                                                                                               \
    float w[UPL][G][H];                                                                                             \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) {                                                               \
        const int j = lane + 32 * u;                                                                                \
        _Pragma("unroll") for (int g = 0; g < G; ++g)                                                               \
        _Pragma("unroll") for (int k = 0; k < H; ++k)                                                               \
            w[u][g][k] = (j < H) ? w_hh[(g * H + j) * H + k] : 0.0f;                                                \
    }
#define WF(G, u, g, k) w[u][g][k]
#define LOAD_W_BWD(G)                                                                                               \
    float w[UPL][G][H];                                                                                             \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) {                                                               \
        const int kk = lane + 32 * u;                                                                               \
        _Pragma("unroll") for (int g = 0; g < G; ++g)                                                               \
        _Pragma("unroll") for (int j = 0; j < H; ++j)                                                               \
            w[u][g][j] = (kk < H) ? w_hh[(g * H + j) * H + kk] : 0.0f;                                              \
    }
#define WB(G, u, g, j) w[u][g][j]
#endif

// acc[u][g] = bias + sum_k W[g*H + j_u][k] * hb[k]  (hb: HP floats, zero-padded, 16-byte aligned); four partial
// sums per output (k mod 4) shorten the dependent FMA chain to H/4.
#define MATVEC_FWD(G, acc, bias, hb)                                                                                \
    float acc##p[UPL][G][4];                                                                                        \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u)                                                                 \
    _Pragma("unroll") for (int g = 0; g < G; ++g) {                                                                 \
        acc##p[u][g][0] = bias[u][g];                                                                               \
        acc##p[u][g][1] = acc##p[u][g][2] = acc##p[u][g][3] = 0.0f;                                                 \
    }                                                                                                               \
    _Pragma("unroll") for (int k4 = 0; k4 < HP / 4; ++k4) {                                                         \
        const float4 v = reinterpret_cast<const float4*>(hb)[k4];                                                   \
        _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                                             \
            const int k = 4 * k4 + e;                                                                               \
            if (k < H) {                                                                                            \
                const float hv = f4(v, e);                                                                          \
                _Pragma("unroll") for (int u = 0; u < UPL; ++u)                                                     \
                _Pragma("unroll") for (int g = 0; g < G; ++g)                                                       \
                    acc##p[u][g][e] = fmaf(WF(G, u, g, k), hv, acc##p[u][g][e]);                                    \
            }                                                                                                       \
        }                                                                                                           \
    }                                                                                                               \
    float acc[UPL][G];                                                                                              \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u)                                                                 \
    _Pragma("unroll") for (int g = 0; g < G; ++g)                                                                   \
        acc[u][g] = (acc##p[u][g][0] + acc##p[u][g][1]) + (acc##p[u][g][2] + acc##p[u][g][3]);

// acc[u] = init[u] + sum_g sum_j W[g*H + j][k_u] * db[g*HP + j]; eight partial sums ((g mod 2, j mod 4)) shorten
// the dependent FMA chain to G*H/8.
#define MATVEC_BWD(G, acc, init, db)                                                                                \
    float acc##p[UPL][8];                                                                                           \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) {                                                               \
        acc##p[u][0] = init[u];                                                                                     \
        _Pragma("unroll") for (int q = 1; q < 8; ++q) acc##p[u][q] = 0.0f;                                          \
    }                                                                                                               \
    _Pragma("unroll") for (int g = 0; g < G; ++g)                                                                   \
    _Pragma("unroll") for (int j4 = 0; j4 < HP / 4; ++j4) {                                                         \
        const float4 v = reinterpret_cast<const float4*>(db + g * HP)[j4];                                          \
        _Pragma("unroll") for (int e = 0; e < 4; ++e) {                                                             \
            const int j = 4 * j4 + e;                                                                               \
            if (j < H) {                                                                                            \
                const float dv = f4(v, e);                                                                          \
                _Pragma("unroll") for (int u = 0; u < UPL; ++u)                                                     \
                    acc##p[u][(g & 1) * 4 + e] = fmaf(WB(G, u, g, j), dv, acc##p[u][(g & 1) * 4 + e]);              \
            }                                                                                                       \
        }                                                                                                           \
    }                                                                                                               \
    float acc[UPL];                                                                                                 \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u)                                                                 \
        acc[u] = ((acc##p[u][0] + acc##p[u][1]) + (acc##p[u][2] + acc##p[u][3]))                                   \
               + ((acc##p[u][4] + acc##p[u][5]) + (acc##p[u][6] + acc##p[u][7]));

// ------------------------------------------------------------------------------------------------ GRU
// gi (B,T,3H) = x W_ih^T + b_ih; w_hh (3H,H); b_hh (3H) or null; h0 (B,H) -> y (B,T,H);
// save (B,T,4H) = [r, z, n, W_hn h + b_hn] per step, or null (no backward).
extern "C" __global__ void __launch_bounds__(32)
gru_fwd(const float* __restrict__ gi, const float* __restrict__ w_hh, const float* __restrict__ b_hh,
        const float* __restrict__ h0, float* __restrict__ y, float* __restrict__ save, int B, int T) {
    constexpr int G = 3;
    const int lane = threadIdx.x;
    const int b = blockIdx.x;
    __shared__ __align__(16) float hbuf[2][HP];
    LOAD_W_FWD(G)
    if (b >= B) return;
    float bh[UPL][G], h[UPL];
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
#pragma unroll
        for (int g = 0; g < G; ++g) bh[u][g] = (b_hh != nullptr && j < H) ? b_hh[g * H + j] : 0.0f;
        h[u] = (j < H) ? h0[(size_t)b * H + j] : 0.0f;
    }
    const float* gib = gi + (size_t)b * T * G * H;
    float* yb = y + (size_t)b * T * H;
    float* sb = save ? save + (size_t)b * T * 4 * H : nullptr;
    // gi prefetched three steps ahead (its loads are independent of the recurrence)
    float p0[UPL][G], p1[UPL][G], p2[UPL][G];
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            p0[u][g] = (j < H && T > 0) ? gib[g * H + j] : 0.0f;
            p1[u][g] = (j < H && T > 1) ? gib[(size_t)G * H + g * H + j] : 0.0f;
            p2[u][g] = (j < H && T > 2) ? gib[(size_t)2 * G * H + g * H + j] : 0.0f;
        }
    }
    for (int t = 0; t < T; ++t) {
        float p3[UPL][G];
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
#pragma unroll
            for (int g = 0; g < G; ++g) p3[u][g] = (j < H && t + 3 < T) ? gib[(size_t)(t + 3) * G * H + g * H + j] : 0.0f;
        }
        float* hb = hbuf[t & 1];
#pragma unroll
        for (int u = 0; u < UPL; ++u)
            if (lane + 32 * u < HP) hb[lane + 32 * u] = h[u];
        __syncwarp();
        MATVEC_FWD(G, acc, bh, hb)
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
            if (j < H) {
                const float r = sigm(p0[u][0] + acc[u][0]);
                const float z = sigm(p0[u][1] + acc[u][1]);
                const float n = tanh_(fmaf(r, acc[u][2], p0[u][2]));
                const float hn = (1.0f - z) * n + z * h[u];
                yb[(size_t)t * H + j] = hn;
                if (sb) {
                    float* s = sb + (size_t)t * 4 * H;
                    s[j] = r;
                    s[H + j] = z;
                    s[2 * H + j] = n;
                    s[3 * H + j] = acc[u][2];
                }
                h[u] = hn;
            }
        }
#pragma unroll
        for (int u = 0; u < UPL; ++u)
#pragma unroll
            for (int g = 0; g < G; ++g) {
                p0[u][g] = p1[u][g];
                p1[u][g] = p2[u][g];
                p2[u][g] = p3[u][g];
            }
    }
}

// dy (B,T,H); w_hh (3H,H); h0 (B,H); y, save from gru_fwd -> dgi (B,T,3H) = dL/d(gi), dgh (B,T,3H) = dL/d(gh),
// dh0 (B,H).
extern "C" __global__ void __launch_bounds__(32)
gru_bwd(const float* __restrict__ dy, const float* __restrict__ w_hh, const float* __restrict__ h0,
        const float* __restrict__ y, const float* __restrict__ save, float* __restrict__ dgi,
        float* __restrict__ dgh, float* __restrict__ dh0, int B, int T) {
    constexpr int G = 3;
    const int lane = threadIdx.x;
    const int b = blockIdx.x;
    __shared__ __align__(16) float dbuf[2][G * HP];
    LOAD_W_BWD(G)
    if (b >= B) return;
    const float* dyb = dy + (size_t)b * T * H;
    const float* yb = y + (size_t)b * T * H;
    const float* sb = save + (size_t)b * T * 4 * H;
    float* dgib = dgi + (size_t)b * T * G * H;
    float* dghb = dgh + (size_t)b * T * G * H;
    // prefetched three steps ahead: dy, r, z, n, hn, h_{t-1}
    float q0[UPL][6], q1[UPL][6], q2[UPL][6];
#define GRU_BWD_LOAD(q, t)                                                                                          \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) {                                                               \
        const int j = lane + 32 * u;                                                                                \
        const bool ok = (j < H) && (t) >= 0;                                                                        \
        const float* s = sb + (size_t)((t) >= 0 ? (t) : 0) * 4 * H;                                                 \
        q[u][0] = ok ? dyb[(size_t)(t) * H + j] : 0.0f;                                                             \
        q[u][1] = ok ? s[j] : 0.0f;                                                                                 \
        q[u][2] = ok ? s[H + j] : 0.0f;                                                                             \
        q[u][3] = ok ? s[2 * H + j] : 0.0f;                                                                         \
        q[u][4] = ok ? s[3 * H + j] : 0.0f;                                                                         \
        q[u][5] = ok ? ((t) > 0 ? yb[(size_t)((t) - 1) * H + j] : h0[(size_t)b * H + j]) : 0.0f;                    \
    }
    GRU_BWD_LOAD(q0, T - 1)
    GRU_BWD_LOAD(q1, T - 2)
    GRU_BWD_LOAD(q2, T - 3)
    float dhc[UPL];
#pragma unroll
    for (int u = 0; u < UPL; ++u) dhc[u] = 0.0f;
    for (int t = T - 1; t >= 0; --t) {
        float q3[UPL][6];
        GRU_BWD_LOAD(q3, t - 3)
        float* db = dbuf[t & 1];
        float zs[UPL], dhs[UPL];
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
            const float dh = q0[u][0] + dhc[u];
            const float r = q0[u][1], z = q0[u][2], n = q0[u][3], hn = q0[u][4], hp = q0[u][5];
            const float dn = dh * (1.0f - z);
            const float dz = dh * (hp - n);
            const float dan = dn * (1.0f - n * n);
            const float dhn = dan * r;
            const float dar = dan * hn * r * (1.0f - r);
            const float daz = dz * z * (1.0f - z);
            zs[u] = z;
            dhs[u] = dh;
            if (j < H) {
                float* gi_t = dgib + (size_t)t * G * H;
                float* gh_t = dghb + (size_t)t * G * H;
                gi_t[j] = dar;
                gi_t[H + j] = daz;
                gi_t[2 * H + j] = dan;
                gh_t[j] = dar;
                gh_t[H + j] = daz;
                gh_t[2 * H + j] = dhn;
            }
            if (j < HP) {  // lanes H <= j < HP hold zeros (all their loads are 0)
                db[j] = dar;
                db[HP + j] = daz;
                db[2 * HP + j] = dhn;
            }
        }
        __syncwarp();
        float direct[UPL];
#pragma unroll
        for (int u = 0; u < UPL; ++u) direct[u] = dhs[u] * zs[u];
        MATVEC_BWD(G, acc, direct, db)
#pragma unroll
        for (int u = 0; u < UPL; ++u) dhc[u] = (lane + 32 * u < H) ? acc[u] : 0.0f;
#pragma unroll
        for (int u = 0; u < UPL; ++u)
#pragma unroll
            for (int e = 0; e < 6; ++e) {
                q0[u][e] = q1[u][e];
                q1[u][e] = q2[u][e];
                q2[u][e] = q3[u][e];
            }
    }
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
        if (j < H) dh0[(size_t)b * H + j] = dhc[u];
    }
}

// ------------------------------------------------------------------------------------------------ LSTM
// gi (B,T,4H) = x W_ih^T + b_ih; w_hh (4H,H); b_hh (4H) or null; h0, c0 (B,H) -> y (B,T,H);
// save (B,T,5H) = [i, f, g, o, c] per step, or null.
extern "C" __global__ void __launch_bounds__(32)
lstm_fwd(const float* __restrict__ gi, const float* __restrict__ w_hh, const float* __restrict__ b_hh,
         const float* __restrict__ h0, const float* __restrict__ c0, float* __restrict__ y,
         float* __restrict__ save, int B, int T) {
    constexpr int G = 4;
    const int lane = threadIdx.x;
    const int b = blockIdx.x;
    __shared__ __align__(16) float hbuf[2][HP];
    LOAD_W_FWD(G)
    if (b >= B) return;
    float bh[UPL][G], h[UPL], c[UPL];
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
#pragma unroll
        for (int g = 0; g < G; ++g) bh[u][g] = (b_hh != nullptr && j < H) ? b_hh[g * H + j] : 0.0f;
        h[u] = (j < H) ? h0[(size_t)b * H + j] : 0.0f;
        c[u] = (j < H) ? c0[(size_t)b * H + j] : 0.0f;
    }
    const float* gib = gi + (size_t)b * T * G * H;
    float* yb = y + (size_t)b * T * H;
    float* sb = save ? save + (size_t)b * T * 5 * H : nullptr;
    // gi prefetched three steps ahead (its loads are independent of the recurrence)
    float p0[UPL][G], p1[UPL][G], p2[UPL][G];
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
#pragma unroll
        for (int g = 0; g < G; ++g) {
            p0[u][g] = (j < H && T > 0) ? gib[g * H + j] : 0.0f;
            p1[u][g] = (j < H && T > 1) ? gib[(size_t)G * H + g * H + j] : 0.0f;
            p2[u][g] = (j < H && T > 2) ? gib[(size_t)2 * G * H + g * H + j] : 0.0f;
        }
    }
    for (int t = 0; t < T; ++t) {
        float p3[UPL][G];
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
#pragma unroll
            for (int g = 0; g < G; ++g) p3[u][g] = (j < H && t + 3 < T) ? gib[(size_t)(t + 3) * G * H + g * H + j] : 0.0f;
        }
        float* hb = hbuf[t & 1];
#pragma unroll
        for (int u = 0; u < UPL; ++u)
            if (lane + 32 * u < HP) hb[lane + 32 * u] = h[u];
        __syncwarp();
        MATVEC_FWD(G, acc, bh, hb)
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
            if (j < H) {
                const float ig = sigm(p0[u][0] + acc[u][0]);
                const float fg = sigm(p0[u][1] + acc[u][1]);
                const float gg = tanh_(p0[u][2] + acc[u][2]);
                const float og = sigm(p0[u][3] + acc[u][3]);
                const float cn = fg * c[u] + ig * gg;
                const float hn = og * tanh_(cn);
                yb[(size_t)t * H + j] = hn;
                if (sb) {
                    float* s = sb + (size_t)t * 5 * H;
                    s[j] = ig;
                    s[H + j] = fg;
                    s[2 * H + j] = gg;
                    s[3 * H + j] = og;
                    s[4 * H + j] = cn;
                }
                h[u] = hn;
                c[u] = cn;
            }
        }
#pragma unroll
        for (int u = 0; u < UPL; ++u)
#pragma unroll
            for (int g = 0; g < G; ++g) {
                p0[u][g] = p1[u][g];
                p1[u][g] = p2[u][g];
                p2[u][g] = p3[u][g];
            }
    }
}

// dy (B,T,H); w_hh (4H,H); c0 (B,H); save from lstm_fwd -> da (B,T,4H) = dL/d(gi) = dL/d(gh), dh0, dc0 (B,H).
extern "C" __global__ void __launch_bounds__(32)
lstm_bwd(const float* __restrict__ dy, const float* __restrict__ w_hh, const float* __restrict__ c0,
         const float* __restrict__ save, float* __restrict__ da, float* __restrict__ dh0,
         float* __restrict__ dc0, int B, int T) {
    constexpr int G = 4;
    const int lane = threadIdx.x;
    const int b = blockIdx.x;
    __shared__ __align__(16) float dbuf[2][G * HP];
    LOAD_W_BWD(G)
    if (b >= B) return;
    const float* dyb = dy + (size_t)b * T * H;
    const float* sb = save + (size_t)b * T * 5 * H;
    float* dab = da + (size_t)b * T * G * H;
    // prefetched three steps ahead: dy, i, f, g, o, c_t, c_{t-1}
    float q0[UPL][7], q1[UPL][7], q2[UPL][7];
#define LSTM_BWD_LOAD(q, t)                                                                                         \
    _Pragma("unroll") for (int u = 0; u < UPL; ++u) {                                                               \
        const int j = lane + 32 * u;                                                                                \
        const bool ok = (j < H) && (t) >= 0;                                                                        \
        const float* s = sb + (size_t)((t) >= 0 ? (t) : 0) * 5 * H;                                                 \
        q[u][0] = ok ? dyb[(size_t)(t) * H + j] : 0.0f;                                                             \
        q[u][1] = ok ? s[j] : 0.0f;                                                                                 \
        q[u][2] = ok ? s[H + j] : 0.0f;                                                                             \
        q[u][3] = ok ? s[2 * H + j] : 0.0f;                                                                         \
        q[u][4] = ok ? s[3 * H + j] : 0.0f;                                                                         \
        q[u][5] = ok ? s[4 * H + j] : 0.0f;                                                                         \
        q[u][6] = ok ? ((t) > 0 ? s[4 * H + j - 5 * H] : c0[(size_t)b * H + j]) : 0.0f;                             \
    }
    LSTM_BWD_LOAD(q0, T - 1)
    LSTM_BWD_LOAD(q1, T - 2)
    LSTM_BWD_LOAD(q2, T - 3)
    float dhc[UPL], dcc[UPL];
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        dhc[u] = 0.0f;
        dcc[u] = 0.0f;
    }
    for (int t = T - 1; t >= 0; --t) {
        float q3[UPL][7];
        LSTM_BWD_LOAD(q3, t - 3)
        float* db = dbuf[t & 1];
#pragma unroll
        for (int u = 0; u < UPL; ++u) {
            const int j = lane + 32 * u;
            const float dh = q0[u][0] + dhc[u];
            const float ig = q0[u][1], fg = q0[u][2], gg = q0[u][3], og = q0[u][4], cn = q0[u][5], cp = q0[u][6];
            const float tc = tanh_(cn);
            const float dc = dcc[u] + dh * og * (1.0f - tc * tc);
            const float dai = dc * gg * ig * (1.0f - ig);
            const float daf = dc * cp * fg * (1.0f - fg);
            const float dag = dc * ig * (1.0f - gg * gg);
            const float dao = dh * tc * og * (1.0f - og);
            dcc[u] = dc * fg;
            if (j < H) {
                float* a_t = dab + (size_t)t * G * H;
                a_t[j] = dai;
                a_t[H + j] = daf;
                a_t[2 * H + j] = dag;
                a_t[3 * H + j] = dao;
            }
            if (j < HP) {
                db[j] = dai;
                db[HP + j] = daf;
                db[2 * HP + j] = dag;
                db[3 * HP + j] = dao;
            }
        }
        __syncwarp();
        float zero[UPL];
#pragma unroll
        for (int u = 0; u < UPL; ++u) zero[u] = 0.0f;
        MATVEC_BWD(G, acc, zero, db)
#pragma unroll
        for (int u = 0; u < UPL; ++u) dhc[u] = (lane + 32 * u < H) ? acc[u] : 0.0f;
#pragma unroll
        for (int u = 0; u < UPL; ++u)
#pragma unroll
            for (int e = 0; e < 7; ++e) {
                q0[u][e] = q1[u][e];
                q1[u][e] = q2[u][e];
                q2[u][e] = q3[u][e];
            }
    }
#pragma unroll
    for (int u = 0; u < UPL; ++u) {
        const int j = lane + 32 * u;
        if (j < H) {
            dh0[(size_t)b * H + j] = dhc[u];
            dc0[(size_t)b * H + j] = dcc[u];
        }
    }
}
