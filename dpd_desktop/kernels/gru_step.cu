// One fused training step of M GRU PA models, or of M GRU DPDs through their frozen GRU PAs, at once
// (training/fused_step.py), float32, -DHID=<1..64> --ftz=true.
//
// The PA model (models/gru.py): y = W_fc h_t + b_fc over a 1-layer GRU (input I/Q, h0 = 0), loss = mean over the
// batch's B*T*2 outputs of (y - target)^2 (MSE) or |y - target| (L1). A PA step is six launches, each over every
// model m (blockIdx.y, or blockIdx.x for advance):
//   gru_fwd_m  (rnn.cu) the batch's frames gathered from the device-resident series (row `counter` of the model's
//              epoch permutation), gi = W_ih x + b_ih on the fly, the recurrence;
//   head       y, the loss partials, dL/dy, dL/dh = W_fc^T dL/dy, and the head's weight-gradient partials;
//   gru_bwd_m  (rnn.cu) the reverse-time recurrence, each batch row's weight gradients (dW_ih, db_ih, dW_hh,
//              db_hh) summed over its steps inside it (its partials);
//   reduce     the partials summed batch row by batch row (head: block by block) into each parameter's .grad,
//              and partial squared norms;
//   update     the gradient norm, clipping (clip / (norm + 1e-6), at most 1), the AdamW update (the step's
//              scalars from row `counter` of the model's table, optim.GraphAdamW);
//   advance    the loss into its epoch slot, then `counter` += 1.
// A DPD step (models/cascade.py: y = PA(DPD(x)), the PA frozen, both such GRU models) puts between the DPD's
// gru_fwd_m and gru_bwd_m: `out` (the DPD's output u = W_fc h + b_fc), the PA's gru_fwd_m on u, the PA's `head`
// (the loss against the target, dL/dh of the PA), the PA's gru_bwd_du_m (rnn.cu: the partials of dL/du = dL/dgi
// W_ih of the PA) and `head_bwd` (dL/du, then the DPD head's partials and dL/dh of the DPD); then reduce,
// update and advance of the DPD. Every sum has an order fixed by B, T and H alone (no atomics, no dependence on M or
// on the launch), so a model's results are bitwise the same trained alone (M = 1) or with others, eager or in a
// CUDA graph. Model m's tensors are the entries of row m of the pointer table `ptrs` (NPTR per model, P_* below).

#ifndef HID
#error "HID (hidden size) must be defined"
#endif
#define H HID
#define G3 (3 * H)
#define NPTR 32
// parameters (then their gradients at +6, exp_avg at +12, exp_avg_sq at +18)
#define P_W_IH 0
#define P_W_HH 1
#define P_B_IH 2
#define P_B_HH 3
#define P_W_FC 4
#define P_B_FC 5
#define P_GRAD 6
#define P_EXP_AVG 12
#define P_EXP_AVG_SQ 18
#define P_X 24       // series input (N, 2) float
#define P_Y 25       // series target (N, 2) float
#define P_PERM 26    // epoch permutation of frames, int64
#define P_COUNTER 27 // batch counter (1,) int64
#define P_LOSSES 28  // the epoch's loss slots, float
#define P_TABLE 29   // AdamW scalars per batch of the epoch (n, 3) float: 1 - lr wd, sqrt(1 - b2^t), -lr / (1 - b1^t)
#define P_CLIP 30    // (1,) float: the clipping norm, 0 = none

#define HEAD_ROWS 64  // rows per head block (one thread per row)
#define HP (H + 1)    // padded row of a shared h tile
#define WPART (H + 4) // gru_bwd_m's partials per batch row and gate row g: dW_hh[g][0..H-1], db_hh[g], dW_ih[g][0..1], db_ih[g]
#define HPART (2 * H + 2)  // head partials: dW_fc[0..1][0..H-1], db_fc[0..1]

template <typename T>
__device__ __forceinline__ T* ptr(const unsigned long long* ptrs, size_t m, int k) {
    return reinterpret_cast<T*>(ptrs[m * NPTR + k]);
}

// The series sample of row r = b * T + t of model m's batch.
__device__ __forceinline__ long long sample_of(const unsigned long long* ptrs, size_t m, int r, int B, int T,
                                               int stride) {
    const long long cnt = *ptr<const long long>(ptrs, m, P_COUNTER);
    const int b = r / T, t = r - b * T;
    const long long frame = ptr<const long long>(ptrs, m, P_PERM)[cnt * B + b];
    return frame * stride + t;
}

// The block's rows of h (M, B*T, H) into the shared tile sh (HEAD_ROWS x HP; rows past n_rows zero), then a
// barrier.
__device__ __forceinline__ void load_tile(float* sh, const float* hb, int n_rows) {
    for (int i = threadIdx.x; i < HEAD_ROWS * H; i += HEAD_ROWS) {
        const int rr = i / H, j = i - rr * H;
        sh[rr * HP + j] = rr < n_rows ? hb[i] : 0.0f;
    }
    __syncthreads();
}

// Head of HEAD_ROWS rows per block, dL/dy of each row from the loss (FROM_DU false) or, a DPD's head, dL/du from
// the PA's input-gradient partials (FROM_DU true: dL/du = the sum of the row's nw partials dup[w], in order). Then
// dh (M, B*T, H) = W_fc^T dL/dy and per block the head partials (HPART floats); with the loss, y = W_fc h + b_fc and
// per block the loss partial (sum over its rows of r0^2 + r1^2, or |r0| + |r1|).
// l1: 0 MSE (dL/dy = scale * r), 1 L1 (dL/dy = scale * sign(r)); scale = 2 / N (MSE) or 1 / N (L1).
template <bool FROM_DU>
__device__ __forceinline__ void head_body(const unsigned long long* __restrict__ ptrs, const float* __restrict__ hseq,
                                          float* __restrict__ dh, float* __restrict__ part_loss,
                                          float* __restrict__ part_head, int B, int T, int stride, int l1, float scale,
                                          const float* __restrict__ dup, int nw) {
    __shared__ float sh[HEAD_ROWS * HP];
    __shared__ float sd[HEAD_ROWS * HP];
    __shared__ float sdo[HEAD_ROWS][2];
    __shared__ float sl[HEAD_ROWS];
    const size_t m = blockIdx.y, rows = (size_t)B * T;
    const int r0 = blockIdx.x * HEAD_ROWS, tid = threadIdx.x;
    const int n_rows = min(HEAD_ROWS, (int)(rows - r0));
    load_tile(sh, hseq + (m * rows + r0) * H, n_rows);
    const float* wfc = ptr<const float>(ptrs, m, P_W_FC);
    const float* bfc = ptr<const float>(ptrs, m, P_B_FC);
    float d0 = 0.0f, d1 = 0.0f, lc = 0.0f;
    if (FROM_DU && tid < n_rows) {  // dL/du: the row's nw partials (rnn.cu gru_bwd_du_m), in order
        const float2* p = reinterpret_cast<const float2*>(dup) + (m * rows + r0 + tid) * (size_t)nw;
        for (int w = 0; w < nw; ++w) {
            d0 += p[w].x;
            d1 += p[w].y;
        }
    }
    if (tid < n_rows) {
        if (!FROM_DU) {
            float o0 = bfc[0], o1 = bfc[1];
#pragma unroll
            for (int j = 0; j < H; ++j) {
                o0 = fmaf(wfc[j], sh[tid * HP + j], o0);
                o1 = fmaf(wfc[H + j], sh[tid * HP + j], o1);
            }
            const long long s = sample_of(ptrs, m, r0 + tid, B, T, stride);
            const float* y = ptr<const float>(ptrs, m, P_Y) + 2 * s;
            const float e0 = o0 - y[0], e1 = o1 - y[1];
            if (l1) {
                lc = fabsf(e0) + fabsf(e1);
                d0 = scale * (float)((e0 > 0.0f) - (e0 < 0.0f));
                d1 = scale * (float)((e1 > 0.0f) - (e1 < 0.0f));
            } else {
                lc = fmaf(e1, e1, e0 * e0);
                d0 = scale * e0;
                d1 = scale * e1;
            }
        }
    }
    sdo[tid][0] = d0;
    sdo[tid][1] = d1;
    sl[tid] = lc;
#pragma unroll
    for (int j = 0; j < H; ++j) sd[tid * HP + j] = fmaf(d1, wfc[H + j], d0 * wfc[j]);
    __syncthreads();
    if (!FROM_DU && tid == 0) {
        float acc = 0.0f;
        for (int rr = 0; rr < HEAD_ROWS; ++rr) acc += sl[rr];
        part_loss[m * gridDim.x + blockIdx.x] = acc;
    }
    float* ph = part_head + (m * gridDim.x + blockIdx.x) * HPART;
    for (int o = tid; o < HPART; o += HEAD_ROWS) {
        float acc = 0.0f;
        if (o < 2 * H) {
            const int k = o / H, j = o - k * H;
            for (int rr = 0; rr < HEAD_ROWS; ++rr) acc = fmaf(sdo[rr][k], sh[rr * HP + j], acc);
        } else {
            const int k = o - 2 * H;
            for (int rr = 0; rr < HEAD_ROWS; ++rr) acc += sdo[rr][k];
        }
        ph[o] = acc;
    }
    float* db = dh + (m * rows + r0) * H;
    for (int i = tid; i < n_rows * H; i += HEAD_ROWS) {
        const int rr = i / H, j = i - rr * H;
        db[i] = sd[rr * HP + j];
    }
}

extern "C" __global__ void __launch_bounds__(HEAD_ROWS)
head(const unsigned long long* __restrict__ ptrs, const float* __restrict__ hseq, float* __restrict__ dh,
     float* __restrict__ part_loss, float* __restrict__ part_head, int B, int T, int stride, int l1, float scale) {
    head_body<false>(ptrs, hseq, dh, part_loss, part_head, B, T, stride, l1, scale, nullptr, 0);
}

// A DPD's head backward: dup (M, B*T, nw) float2, the PA's input-gradient partials (rnn.cu gru_bwd_du_m; nw: the
// PA kernel's warps per block).
extern "C" __global__ void __launch_bounds__(HEAD_ROWS)
head_bwd(const unsigned long long* __restrict__ ptrs, const float* __restrict__ hseq, float* __restrict__ dh,
         float* __restrict__ part_head, const float* __restrict__ dup, int nw, int B, int T) {
    head_body<true>(ptrs, hseq, dh, nullptr, part_head, B, T, 0, 0, 0.0f, dup, nw);
}

// A DPD's output: u (M, B*T, 2) = W_fc h + b_fc of every row (the PA's input; the sums in the order of head's y).
extern "C" __global__ void __launch_bounds__(HEAD_ROWS)
out(const unsigned long long* __restrict__ ptrs, const float* __restrict__ hseq, float* __restrict__ u, int B, int T) {
    __shared__ float sh[HEAD_ROWS * HP];
    const size_t m = blockIdx.y, rows = (size_t)B * T;
    const int r0 = blockIdx.x * HEAD_ROWS, tid = threadIdx.x;
    const int n_rows = min(HEAD_ROWS, (int)(rows - r0));
    load_tile(sh, hseq + (m * rows + r0) * H, n_rows);
    if (tid >= n_rows) return;
    const float* wfc = ptr<const float>(ptrs, m, P_W_FC);
    const float* bfc = ptr<const float>(ptrs, m, P_B_FC);
    float o0 = bfc[0], o1 = bfc[1];
#pragma unroll
    for (int j = 0; j < H; ++j) {
        o0 = fmaf(wfc[j], sh[tid * HP + j], o0);
        o1 = fmaf(wfc[H + j], sh[tid * HP + j], o1);
    }
    float* ur = u + (m * rows + r0 + tid) * 2;
    ur[0] = o0;
    ur[1] = o1;
}

#define RED_THREADS 256
#define N_PARAM (6 * H + G3 * H + G3 + G3 + 2 * H + 2)

// Gradient element e of the model's parameters (in the order W_ih, W_hh, b_ih, b_hh, W_fc, b_fc, each row-major),
// summed over the chunks in order; *k and *idx: which parameter and which element of it.
__device__ __forceinline__ float grad_of(int e, const float* pw, int n_w, const float* ph, int n_h, int* k, int* idx) {
    int off;  // column in a chunk's partials
    const float* base;
    int n, stride;
    if (e < 6 * H) {             // W_ih[g][c]
        *k = P_W_IH; *idx = e;
        const int g = e / 2, c = e - 2 * g;
        base = pw; n = n_w; stride = G3 * WPART; off = g * WPART + H + 1 + c;
    } else if ((e -= 6 * H) < G3 * H) {  // W_hh[g][c]
        *k = P_W_HH; *idx = e;
        const int g = e / H, c = e - g * H;
        base = pw; n = n_w; stride = G3 * WPART; off = g * WPART + c;
    } else if ((e -= G3 * H) < G3) {     // b_ih[g]
        *k = P_B_IH; *idx = e;
        base = pw; n = n_w; stride = G3 * WPART; off = e * WPART + H + 3;
    } else if ((e -= G3) < G3) {         // b_hh[g]
        *k = P_B_HH; *idx = e;
        base = pw; n = n_w; stride = G3 * WPART; off = e * WPART + H;
    } else if ((e -= G3) < 2 * H) {      // W_fc[k][j]
        *k = P_W_FC; *idx = e;
        base = ph; n = n_h; stride = HPART; off = e;
    } else {                             // b_fc[k]
        e -= 2 * H;
        *k = P_B_FC; *idx = e;
        base = ph; n = n_h; stride = HPART; off = 2 * H + e;
    }
    float acc = 0.0f;
#pragma unroll 20
    for (int c = 0; c < n; ++c) acc += base[(size_t)c * stride + off];  // in order; the loads run ahead
    return acc;
}

// The gradients: element e = blockIdx.x * RED_THREADS + tid of model m summed over the chunks (in order) into the
// model's .grad, and per block the sum of their squares (a fixed tree) into part_norm (M, gridDim.x).
extern "C" __global__ void __launch_bounds__(RED_THREADS)
reduce(const unsigned long long* __restrict__ ptrs, const float* __restrict__ part_head,
       const float* __restrict__ part_w, float* __restrict__ part_norm, int n_head, int n_w) {
    __shared__ float red[RED_THREADS];
    const size_t m = blockIdx.y;
    const int tid = threadIdx.x, e = blockIdx.x * RED_THREADS + tid;
    float sq = 0.0f;
    if (e < N_PARAM) {
        int k, idx;
        const float gval = grad_of(e, part_w + m * (size_t)n_w * G3 * WPART, n_w,
                                   part_head + m * (size_t)n_head * HPART, n_head, &k, &idx);
        ptr<float>(ptrs, m, P_GRAD + k)[idx] = gval;
        sq = gval * gval;
    }
    red[tid] = sq;
    __syncthreads();
    for (int s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    if (tid == 0) part_norm[m * gridDim.x + blockIdx.x] = red[0];
}

// Clipping and AdamW of element e (as in reduce): the gradient norm from part_norm (summed in order, the same in
// every block), coef = min(clip / (norm + 1e-6), 1) when clip > 0 (torch.nn.utils.clip_grad_norm_'s rule), then
// p = p (1 - lr wd); m = m + (1 - b1)(g - m); v = b2 v + (1 - b2) g^2; p = p + step_size * m / (sqrt(v) / bc2 + eps)
// with row `counter` of the model's table (1 - lr wd, bc2 = sqrt(1 - b2^t), step_size = -lr / (1 - b1^t)).
extern "C" __global__ void __launch_bounds__(RED_THREADS)
update(const unsigned long long* __restrict__ ptrs, const float* __restrict__ part_norm, float beta1, float beta2,
       float eps) {
    const size_t m = blockIdx.y;
    const int e = blockIdx.x * RED_THREADS + threadIdx.x;
    if (e >= N_PARAM) return;
    float sq = 0.0f;
    for (int i = 0; i < (int)gridDim.x; ++i) sq += part_norm[m * gridDim.x + i];
    const float clip = *ptr<const float>(ptrs, m, P_CLIP);
    const float coef = clip > 0.0f ? fminf(clip / (sqrtf(sq) + 1e-6f), 1.0f) : 1.0f;
    const long long cnt = *ptr<const long long>(ptrs, m, P_COUNTER);
    const float* row = ptr<const float>(ptrs, m, P_TABLE) + cnt * 3;
    const float wd = row[0], bc2 = row[1], step_size = row[2];
    int k, idx = e;
    if (idx < 6 * H) { k = 0; }
    else if ((idx -= 6 * H) < G3 * H) { k = 1; }
    else if ((idx -= G3 * H) < G3) { k = 2; }
    else if ((idx -= G3) < G3) { k = 3; }
    else if ((idx -= G3) < 2 * H) { k = 4; }
    else { k = 5; idx -= 2 * H; }
    float* gp = ptr<float>(ptrs, m, P_GRAD + k) + idx;
    const float gr = *gp * coef;
    *gp = gr;
    float* p = ptr<float>(ptrs, m, k) + idx;
    float* ma = ptr<float>(ptrs, m, P_EXP_AVG + k) + idx;
    float* va = ptr<float>(ptrs, m, P_EXP_AVG_SQ + k) + idx;
    const float pd = *p * wd;
    const float mn = *ma + (1.0f - beta1) * (gr - *ma);
    const float vn = *va * beta2 + (1.0f - beta2) * gr * gr;
    const float denom = sqrtf(vn) / bc2 + eps;
    *ma = mn;
    *va = vn;
    *p = fmaf(mn / denom, step_size, pd);
}

// One warp per model: the loss (the head partials summed lane-strided in order, then a fixed xor tree) divided by
// loss_div into slot `counter` of the model's epoch losses; then counter += 1 (the step's last kernel).
extern "C" __global__ void advance(const unsigned long long* __restrict__ ptrs, const float* __restrict__ part_loss,
                                   int n_head, float loss_div) {
    const size_t m = blockIdx.x;
    const int lane = threadIdx.x;
    float acc = 0.0f;
    for (int c = lane; c < n_head; c += 32) acc += part_loss[m * n_head + c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) {
        long long* counter = ptr<long long>(ptrs, m, P_COUNTER);
        const long long cnt = *counter;
        ptr<float>(ptrs, m, P_LOSSES)[cnt] = acc / loss_div;
        *counter = cnt + 1;
    }
}
