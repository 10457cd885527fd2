// The CUDA side of `kiln bench --backend wgpu --stream`: the same three plain kernels (read,
// write, copy; 16-byte accesses, grid-stride, four in flight where the WGSL has four), the same
// 128 MiB and the same workgroup sweep, timed with events (median of 20 after a warm-up), so the
// Vulkan adapter's rates have a same-device CUDA counterpart. Not part of kiln: a yardstick.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

__global__ void stream_read(const uint4* __restrict__ src, uint4* dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    acc.x ^= a.x ^ b.x ^ c.x ^ d.x; acc.y ^= a.y ^ b.y ^ c.y ^ d.y;
    acc.z ^= a.z ^ b.z ^ c.z ^ d.z; acc.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < n; i += stride) { uint4 a = src[i]; acc.x ^= a.x; acc.y ^= a.y; acc.z ^= a.z; acc.w ^= a.w; }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) dst[threadIdx.x & 1023] = acc;
}

__global__ void stream_write(uint4* dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint4 v = make_uint4((unsigned)i, (unsigned)i, (unsigned)i, (unsigned)i);
  for (; i < n; i += stride) dst[i] = v;
}

__global__ void stream_copy(const uint4* __restrict__ src, uint4* dst, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x, i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

template <typename F> static double median_us(F launch, int runs) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  launch(); cudaDeviceSynchronize();
  std::vector<float> t;
  for (int r = 0; r < runs; r++) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000.0f);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  const size_t bytes = 128u << 20, n = bytes / 16;
  uint4 *src, *dst, *big_a, *big_b;
  cudaMalloc(&src, bytes); cudaMalloc(&dst, bytes);
  cudaMemset(src, 0, bytes); cudaMemset(dst, 0, bytes);
  cudaMalloc(&big_a, 256u << 20); cudaMalloc(&big_b, 256u << 20);
  double copy = median_us([&] { cudaMemcpyAsync(big_b, big_a, 256u << 20, cudaMemcpyDeviceToDevice); }, 50);
  cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
  printf("# %s (CUDA) cudaMemcpy copy: %.1f GB/s read + write (256 MiB, median of 50)\n", p.name,
         2.0 * (256u << 20) / (copy * 1e3));
  printf("kernel,checks,workgroups,median_us,gb_s\n");
  std::vector<unsigned> groups;
  for (unsigned g = 64; g < n / 256; g *= 2) groups.push_back(g);
  groups.push_back(n / 256);
  const char* names[3] = {"read", "write", "copy"};
  for (int k = 0; k < 3; k++) {
    for (unsigned g : groups) {
      double us = median_us([&] {
        if (k == 0) stream_read<<<g, 256>>>(src, dst, n);
        else if (k == 1) stream_write<<<g, 256>>>(dst, n);
        else stream_copy<<<g, 256>>>(src, dst, n);
      }, 20);
      double moved = (k == 2 ? 2.0 : 1.0) * bytes;
      printf("%s,cuda,%u,%.1f,%.1f\n", names[k], g, us, moved / (us * 1e3));
    }
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { printf("# error: %s\n", cudaGetErrorString(e)); return 1; }
  return 0;
}
