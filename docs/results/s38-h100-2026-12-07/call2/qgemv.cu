// Session 38 design study for #21 (not part of kiln): a one-row 4-bit affine GEMV (MLX layout,
// g64, bf16 x/scales/biases, f32 y) on the m16n8k16 wave multiply with 16-byte code loads, the
// two groups of a 128-code step kept apart by the columns of B, x permuted once per block into
// shared memory. Checked against a plain f32 kernel; timed as back-to-back launches over enough
// weight copies to miss L2, against a 256 MiB device copy in the same process.
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9e3779b9u ^ seed; h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    p[i] = h;
  }
}
// bf16 pairs with values in [lo, lo + span) from a hash.
__global__ void fill_bf16(uint32_t* p, size_t n, uint32_t seed, float lo, float span) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 0x9e3779b9u ^ seed; h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13;
    float a = lo + span * (h & 0xffff) / 65536.0f, b = lo + span * (h >> 16) / 65536.0f;
    __nv_bfloat16 ha = __float2bfloat16(a), hb = __float2bfloat16(b);
    p[i] = (uint32_t)*(uint16_t*)&ha | ((uint32_t)*(uint16_t*)&hb << 16);
  }
}

__device__ __forceinline__ float bf_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// Reference: one warp per row, plain f32.
__global__ void ref_gemv(const uint32_t* wq, const uint32_t* sc, const uint32_t* bi, const uint32_t* x2, float* y, int N, int K) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= N) return;
  int G = K / 64;
  float acc = 0.f;
  for (int k = lane; k < K; k += 32) {
    uint32_t w = wq[(size_t)warp * (K / 8) + k / 8];
    int code = (w >> (4 * (k % 8))) & 15;
    size_t e = (size_t)warp * G + k / 64;
    uint32_t sw = sc[e / 2], bw = bi[e / 2];
    float s = (e & 1) ? bf_hi(sw) : bf_lo(sw), b = (e & 1) ? bf_hi(bw) : bf_lo(bw);
    uint32_t xw = x2[k / 2];
    float xv = (k & 1) ? bf_hi(xw) : bf_lo(xw);
    acc += (s * code + b) * xv;
  }
  for (int m = 16; m; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (lane == 0) y[warp] = acc;
}

__device__ __forceinline__ uint32_t codes_pair(uint32_t w, int t) {
  return ((w >> (4 * t)) & 0x000F000Fu) | 0x43004300u;  // (128 + code t, 128 + code t+4) in bf16
}

__device__ __forceinline__ void mma16816(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One warp: a tile of 16 rows over its split of K's 128-code steps; block: 8 warps = 8/S tiles x S splits.
template <int D, int MINB>
__global__ void __launch_bounds__(256, MINB) qgemv_mma(const uint4* __restrict__ wq, const uint32_t* __restrict__ sc,
    const uint32_t* __restrict__ bi, const uint4* __restrict__ x8, float* __restrict__ y, int N, int K, int S) {
  extern __shared__ uint4 smem[];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, r8 = lane / 4, q = lane % 4;
  const int G = K / 64, steps = K / 128;
  uint4* xp = smem;
  uint4* zero = xp + K / 8;
  float* xsum = (float*)(zero + 4);
  float* red = xsum + G;
  for (int c = tid; c < K / 8; c += 256) {
    uint4 v = x8[c];
    xp[c] = make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632),
                       __byte_perm(v.y, v.w, 0x5410), __byte_perm(v.y, v.w, 0x7632));
  }
  if (tid < 4) zero[tid] = make_uint4(0, 0, 0, 0);
  for (int g = tid; g < G; g += 256) {
    float s = 0.f;
    for (int c = 0; c < 8; c++) {
      uint4 v = x8[g * 8 + c];
      s += bf_lo(v.x) + bf_hi(v.x) + bf_lo(v.y) + bf_hi(v.y) + bf_lo(v.z) + bf_hi(v.z) + bf_lo(v.w) + bf_hi(v.w);
    }
    xsum[g] = s;
  }
  __syncthreads();
  const int tiles_per_block = 8 / S;
  const int tile = blockIdx.x * tiles_per_block + warp / S, split = warp % S;
  int na = tile * 16 + r8, nb = na + 8;
  na = min(na, N - 1);
  nb = min(nb, N - 1);
  const int per = (steps + S - 1) / S, s0 = split * per, s1 = min(steps, s0 + per);
  const uint4* wa_row = wq + (size_t)na * (K / 32) + q;  // a step is 4 uint4 of a row
  const uint4* wb_row = wq + (size_t)nb * (K / 32) + q;
  const uint32_t* sa_row = sc + (size_t)na * (G / 2);
  const uint32_t* sb_row = sc + (size_t)nb * (G / 2);
  const uint32_t* ba_row = bi + (size_t)na * (G / 2);
  const uint32_t* bb_row = bi + (size_t)nb * (G / 2);
  const bool active = (r8 == 0 && q < 2) || (r8 == 1 && q >= 2);
  uint4 wa[D], wb[D];
  uint32_t sa[D], sb[D], ba[D], bb[D];
#pragma unroll
  for (int i = 0; i < D; i++) {
    int s = s0 + i;
    if (s < s1) {
      wa[i] = wa_row[4 * s]; wb[i] = wb_row[4 * s];
      sa[i] = sa_row[s]; sb[i] = sb_row[s]; ba[i] = ba_row[s]; bb[i] = bb_row[s];
    }
  }
  float acc_a = 0.f, acc_b = 0.f;
  for (int base = s0; base < s1; base += D) {
#pragma unroll
    for (int i = 0; i < D; i++) {
      const int s = base + i;
      if (s < s1) {
        const uint4* xs = active ? xp + s * 16 + q * 4 : zero;
        uint4 X[4];
#pragma unroll
        for (int j = 0; j < 4; j++) X[j] = xs[j];
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t A[4] = {wa[i].x, wa[i].y, wa[i].z, wa[i].w};
        const uint32_t B[4] = {wb[i].x, wb[i].y, wb[i].z, wb[i].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const uint32_t xv[4] = {X[j].x, X[j].y, X[j].z, X[j].w};
#pragma unroll
          for (int h = 0; h < 2; h++)
            mma16816(c, codes_pair(A[j], 2 * h), codes_pair(B[j], 2 * h), codes_pair(A[j], 2 * h + 1),
                     codes_pair(B[j], 2 * h + 1), xv[2 * h], xv[2 * h + 1]);
        }
        const float x0 = xsum[2 * s], x1 = xsum[2 * s + 1];
        float s_a0 = bf_lo(sa[i]), s_a1 = bf_hi(sa[i]), s_b0 = bf_lo(sb[i]), s_b1 = bf_hi(sb[i]);
        acc_a = fmaf(s_a0, c[0], acc_a); acc_a = fmaf(fmaf(-128.f, s_a0, bf_lo(ba[i])), x0, acc_a);
        acc_a = fmaf(s_a1, c[1], acc_a); acc_a = fmaf(fmaf(-128.f, s_a1, bf_hi(ba[i])), x1, acc_a);
        acc_b = fmaf(s_b0, c[2], acc_b); acc_b = fmaf(fmaf(-128.f, s_b0, bf_lo(bb[i])), x0, acc_b);
        acc_b = fmaf(s_b1, c[3], acc_b); acc_b = fmaf(fmaf(-128.f, s_b1, bf_hi(bb[i])), x1, acc_b);
        const int ahead = s + D;
        if (ahead < s1) {
          wa[i] = wa_row[4 * ahead]; wb[i] = wb_row[4 * ahead];
          sa[i] = sa_row[ahead]; sb[i] = sb_row[ahead]; ba[i] = ba_row[ahead]; bb[i] = bb_row[ahead];
        }
      }
    }
  }
  if (q == 0) { red[warp * 16 + r8] = acc_a; red[warp * 16 + r8 + 8] = acc_b; }
  __syncthreads();
  if (tid < tiles_per_block * 16) {
    const int tl = tid / 16, row = tid % 16;
    float t = 0.f;
    for (int sp = 0; sp < S; sp++) t += red[(tl * S + sp) * 16 + row];
    const int n = (blockIdx.x * tiles_per_block + tl) * 16 + row;
    if (n < N) y[n] = t;
  }
}

static int splits_for(int N, int K) {
  int tiles = (N + 15) / 16, steps = K / 128, s = 1;
  while (s < 8 && tiles * s < 2048 && steps >= 2 * s * 2) s *= 2;
  return s;
}

template <typename F> static float per_launch_us(F launch, int iters) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 5; i++) launch(i);
  std::vector<float> t;
  for (int r = 0; r < 7; r++) {
    cudaEventRecord(a);
    for (int i = 0; i < iters; i++) launch(i);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000.f / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <int D, int MINB>
static void run_variant(const char* name, int N, int K, int copies, uint32_t** wq, uint32_t** sc, uint32_t** bi,
                        uint32_t* x2, float* y, float* yref, double bytes, double copy_gbs) {
  int S = splits_for(N, K), tpb = 8 / S, tiles = (N + 15) / 16, blocks = (tiles + tpb - 1) / tpb;
  size_t smem = (size_t)K * 2 + 64 + (K / 64) * 4 + 8 * 16 * 4;
  auto kern = qgemv_mma<D, MINB>;
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  cudaMemset(y, 0xff, N * 4);
  kern<<<blocks, 256, smem>>>((const uint4*)wq[0], sc[0], bi[0], (const uint4*)x2, y, N, K, S);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("%s: %s\n", name, cudaGetErrorString(e)); exit(1); }
  std::vector<float> a(N), r(N);
  cudaMemcpy(a.data(), y, N * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(r.data(), yref, N * 4, cudaMemcpyDeviceToHost);
  double num = 0, den = 0, worst = 0, rmax = 0;
  for (int i = 0; i < N; i++) {
    double d = (double)a[i] - r[i]; num += d * d; den += (double)r[i] * r[i];
    worst = std::max(worst, std::fabs(d)); rmax = std::max(rmax, (double)std::fabs(r[i]));
    if (!std::isfinite(a[i])) { worst = INFINITY; }
  }
  float us = per_launch_us([&](int i) {
    int c = i % copies;
    kern<<<blocks, 256, smem>>>((const uint4*)wq[c], sc[c], bi[c], (const uint4*)x2, y, N, K, S);
  }, 200);
  cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, kern);
  int occ; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, 256, smem);
  printf("%-10s 1x%d->%-7d S%d blocks %5d regs %3d local %3zu occ %d  %8.2f us %7.1f GB/s %5.1f%% copy  nrms %.2e nmax %.2e\n",
         name, K, N, S, blocks, fa.numRegs, fa.localSizeBytes, occ, us, bytes / us / 1e3, 100.0 * bytes / us / 1e3 / copy_gbs,
         std::sqrt(num / den), worst / rmax);
}

int main() {
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  void *ca, *cb; cudaMalloc(&ca, 256u << 20); cudaMalloc(&cb, 256u << 20);
  float cus = per_launch_us([&](int) { cudaMemcpyAsync(cb, ca, 256u << 20, cudaMemcpyDeviceToDevice); }, 20);
  double copy_gbs = 2.0 * (256u << 20) / cus / 1e3;
  printf("# %s: copy %.1f GB/s (256 MiB, read + write bytes)\n", p.name, copy_gbs);
  cudaFree(ca); cudaFree(cb);
  const int shapes[][2] = {{4096, 4096}, {4096, 6144}, {4096, 14336}, {4096, 28672}, {14336, 4096}, {4096, 128256}, {2048, 4096}, {4096, 1024}};
  for (auto& sh : shapes) {
    int K = sh[0], N = sh[1];
    size_t wbytes = (size_t)N * K / 2, sbytes = (size_t)N * (K / 64) * 2;
    double bytes = wbytes + 2.0 * sbytes + K * 2 + N * 4;
    int copies = std::max(1, (int)std::ceil(400e6 / bytes));
    copies = std::min(copies, 64);
    std::vector<uint32_t*> wq(copies), sc(copies), bi(copies);
    for (int c = 0; c < copies; c++) {
      cudaMalloc(&wq[c], wbytes); cudaMalloc(&sc[c], sbytes); cudaMalloc(&bi[c], sbytes);
      fill_u32<<<1024, 256>>>(wq[c], wbytes / 4, 17 + c);
      fill_bf16<<<1024, 256>>>(sc[c], sbytes / 4, 29 + c, 0.001f, 0.02f);
      fill_bf16<<<1024, 256>>>(bi[c], sbytes / 4, 31 + c, -0.1f, 0.05f);
    }
    uint32_t* x2; cudaMalloc(&x2, K * 2); fill_bf16<<<64, 256>>>(x2, K / 2, 7, -1.f, 2.f);
    float *y, *yref; cudaMalloc(&y, N * 4); cudaMalloc(&yref, N * 4);
    ref_gemv<<<(N * 32 + 255) / 256, 256>>>(wq[0], sc[0], bi[0], x2, yref, N, K);
    run_variant<4, 2>("d4b2", N, K, copies, wq.data(), sc.data(), bi.data(), x2, y, yref, bytes, copy_gbs);
    run_variant<4, 3>("d4b3", N, K, copies, wq.data(), sc.data(), bi.data(), x2, y, yref, bytes, copy_gbs);
    run_variant<2, 4>("d2b4", N, K, copies, wq.data(), sc.data(), bi.data(), x2, y, yref, bytes, copy_gbs);
    run_variant<8, 2>("d8b2", N, K, copies, wq.data(), sc.data(), bi.data(), x2, y, yref, bytes, copy_gbs);
    for (int c = 0; c < copies; c++) { cudaFree(wq[c]); cudaFree(sc[c]); cudaFree(bi[c]); }
    cudaFree(x2); cudaFree(y); cudaFree(yref);
  }
  return 0;
}
