// coil's generated kernels for layernorm_gelu (8192 x 1024) and softmax (8192 x 4096) on the GPU
// as they were before the row was kept in registers (a warp or a block per row, each pass over
// the row reading it again from memory or L1): row_kernels.cu's reference and its "before" row.
// coil no longer generates these, so they are kept by hand; they need the prelude of coil's
// sources, which row_kernels_generated.cuh (the kernels coil generates now) begins with.
extern "C" __global__ void __launch_bounds__(256) red_fused_sum_var_div_sub_add_rsqrt_mul_erf_0_looped(const float* __restrict__ in0, const float* __restrict__ const1, const float* __restrict__ const2, float* __restrict__ buf3) {
  const int coil_lane = threadIdx.x & 31;
  const i64 row = (i64)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (row >= 8192) return;
  float acc_buf0 = 0.0f;
  if ((1024) % 4 == 0 && coil_vec_aligned<4>(in0 + (1024*row))) {
    for (i64 coil_base = (i64)coil_lane * 4; coil_base < 1024; coil_base += 128) {
      coil_vec<float, 4> coil_v0 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (1024*row) + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t0 = (float)(coil_v0.v[coil_j]);
        acc_buf0 = coil_sum{}(acc_buf0, t0);
      }
    }
  }
  else {
    {
      for (i64 r = coil_lane; r < 1024; r += 32) {
        float t1 = in0[r + 1024*row];
        acc_buf0 = coil_sum{}(acc_buf0, t1);
      }
    }
  }
  const float red_buf0 = coil_warp_all_reduce(acc_buf0, coil_sum{});
  float t2 = (red_buf0 / 1024.0f);
  float acc_buf1 = 0.0f;
  if ((1024) % 4 == 0 && coil_vec_aligned<4>(in0 + (1024*row))) {
    for (i64 coil_base = (i64)coil_lane * 4; coil_base < 1024; coil_base += 128) {
      coil_vec<float, 4> coil_v0 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (1024*row) + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t3 = (float)(coil_v0.v[coil_j]);
        float t4 = (t3 - t2);
        float t5 = (t4 * t4);
        acc_buf1 = coil_sum{}(acc_buf1, t5);
      }
    }
  }
  else {
    {
      for (i64 r = coil_lane; r < 1024; r += 32) {
        float t6 = in0[r + 1024*row];
        float t7 = (t6 - t2);
        float t8 = (t7 * t7);
        acc_buf1 = coil_sum{}(acc_buf1, t8);
      }
    }
  }
  const float red_buf1 = coil_warp_all_reduce(acc_buf1, coil_sum{});
  if ((1024) % 4 == 0 && coil_vec_aligned<4>(buf3 + (1024*row)) && coil_vec_aligned<4>(in0 + (1024*row)) && coil_vec_aligned<4>(const1) && coil_vec_aligned<4>(const2)) {
    for (i64 coil_base = (i64)coil_lane * 4; coil_base < 1024; coil_base += 128) {
      coil_vec<float, 4> coil_v0;
      coil_vec<float, 4> coil_v1 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (1024*row) + coil_base);
      coil_vec<float, 4> coil_v2 = *reinterpret_cast<const coil_vec<float, 4>*>(const1 + coil_base);
      coil_vec<float, 4> coil_v3 = *reinterpret_cast<const coil_vec<float, 4>*>(const2 + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t9 = (float)(coil_v1.v[coil_j]);
        float t10 = (red_buf0 / 1024.0f);
        float t11 = (t9 - t10);
        float t12 = (red_buf1 / 1024.0f);
        float t13 = (t12 + 9.99999975e-06f);
        float t14 = (1.0f / sqrtf(t13));
        float t15 = (t11 * t14);
        float t16 = (float)(coil_v2.v[coil_j]);
        float t17 = (t15 * t16);
        float t18 = (float)(coil_v3.v[coil_j]);
        float t19 = (t17 + t18);
        float t20 = (t19 * 0.5f);
        float t21 = (t19 * 0.707106769f);
        float t22 = erff(t21);
        float t23 = (t22 + 1.0f);
        float t24 = (t20 * t23);
        coil_v0.v[coil_j] = (float)(t24);
      }
      *reinterpret_cast<coil_vec<float, 4>*>(buf3 + (1024*row) + coil_base) = coil_v0;
    }
  }
  else {
    {
      for (i64 r = coil_lane; r < 1024; r += 32) {
        float t25 = in0[r + 1024*row];
        float t26 = (red_buf0 / 1024.0f);
        float t27 = (t25 - t26);
        float t28 = (red_buf1 / 1024.0f);
        float t29 = (t28 + 9.99999975e-06f);
        float t30 = (1.0f / sqrtf(t29));
        float t31 = (t27 * t30);
        float t32 = const1[r];
        float t33 = (t31 * t32);
        float t34 = const2[r];
        float t35 = (t33 + t34);
        float t36 = (t35 * 0.5f);
        float t37 = (t35 * 0.707106769f);
        float t38 = erff(t37);
        float t39 = (t38 + 1.0f);
        float t40 = (t36 * t39);
        buf3[r + 1024*row] = (float)(t40);
      }
    }
  }
}
extern "C" __global__ void __launch_bounds__(256) red_fused_amax_sub_exp_sum_div_0_looped(const float* __restrict__ in0, float* __restrict__ buf2) {
  __shared__ double coil_smem[66];
  const i64 row = blockIdx.x;
  float acc_buf0 = -coil_inf_f();
  if ((4096) % 4 == 0 && coil_vec_aligned<4>(in0 + (4096*row))) {
    for (i64 coil_base = (i64)threadIdx.x * 4; coil_base < 4096; coil_base += 1024) {
      coil_vec<float, 4> coil_v0 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (4096*row) + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t0 = (float)(coil_v0.v[coil_j]);
        acc_buf0 = coil_max{}(acc_buf0, t0);
      }
    }
  }
  else {
    {
      for (i64 r = threadIdx.x; r < 4096; r += 256) {
        float t1 = in0[r + 4096*row];
        acc_buf0 = coil_max{}(acc_buf0, t1);
      }
    }
  }
  const float red_buf0 = coil_block_reduce(acc_buf0, coil_max{}, (float)-coil_inf_f(), coil_smem);
  float acc_buf1 = 0.0f;
  if ((4096) % 4 == 0 && coil_vec_aligned<4>(in0 + (4096*row))) {
    for (i64 coil_base = (i64)threadIdx.x * 4; coil_base < 4096; coil_base += 1024) {
      coil_vec<float, 4> coil_v0 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (4096*row) + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t2 = (float)(coil_v0.v[coil_j]);
        float t3 = (t2 - red_buf0);
        float t4 = coil_softmax_exp(t3);
        acc_buf1 = coil_sum{}(acc_buf1, t4);
      }
    }
  }
  else {
    {
      for (i64 r = threadIdx.x; r < 4096; r += 256) {
        float t5 = in0[r + 4096*row];
        float t6 = (t5 - red_buf0);
        float t7 = coil_softmax_exp(t6);
        acc_buf1 = coil_sum{}(acc_buf1, t7);
      }
    }
  }
  const float red_buf1 = coil_block_reduce(acc_buf1, coil_sum{}, (float)0.0f, coil_smem);
  if ((4096) % 4 == 0 && coil_vec_aligned<4>(buf2 + (4096*row)) && coil_vec_aligned<4>(in0 + (4096*row))) {
    for (i64 coil_base = (i64)threadIdx.x * 4; coil_base < 4096; coil_base += 1024) {
      coil_vec<float, 4> coil_v0;
      coil_vec<float, 4> coil_v1 = *reinterpret_cast<const coil_vec<float, 4>*>(in0 + (4096*row) + coil_base);
      #pragma unroll
      for (int coil_j = 0; coil_j < 4; ++coil_j) {
        const i64 r = coil_base + coil_j;
        float t8 = (float)(coil_v1.v[coil_j]);
        float t9 = (t8 - red_buf0);
        float t10 = coil_softmax_exp(t9);
        float t11 = coil_softmax_div(t10, red_buf1);
        coil_v0.v[coil_j] = (float)(t11);
      }
      *reinterpret_cast<coil_vec<float, 4>*>(buf2 + (4096*row) + coil_base) = coil_v0;
    }
  }
  else {
    {
      for (i64 r = threadIdx.x; r < 4096; r += 256) {
        float t12 = in0[r + 4096*row];
        float t13 = (t12 - red_buf0);
        float t14 = coil_softmax_exp(t13);
        float t15 = coil_softmax_div(t14, red_buf1);
        buf2[r + 4096*row] = (float)(t15);
      }
    }
  }
}
