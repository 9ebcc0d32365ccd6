/* Prints, as JSON, sizeof and the offset and size of every field of every public struct
 * of ckjit.h, gemm.h, attention.h, paged_attention.h, gemm_fp8.h and moe.h, for
 * python/tests/test_struct_layout.py,
 * which compares them with the package's ctypes mirrors (python/ckjit/_structs.py)
 * and the field names with the headers' text.  A struct added to a header must
 * be added here too: the Python test checks that this program lists every
 * `typedef struct` of the headers. */
#include <ckjit/ckjit.h>
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size) {
  printf("%s\n  \"%s\": {\"sizeof\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
  first_struct = 0;
  first_field = 1;
}

static void field(const char *name, size_t offset, size_t size) {
  printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
  first_field = 0;
}

static void end(void) { printf("}}"); }

#define BEGIN(T) begin(#T, sizeof(T))
#define F(T, f) field(#f, offsetof(T, f), sizeof(((T *)0)->f))

int main(void) {
  BEGIN(ckjit_options);
  F(ckjit_options, struct_size); F(ckjit_options, backend); F(ckjit_options, device);
  F(ckjit_options, arch); F(ckjit_options, cache_dir); F(ckjit_options, disk_cache); F(ckjit_options, remote_cache);
  end();

  BEGIN(ckjit_device_info);
  F(ckjit_device_info, backend); F(ckjit_device_info, has_device); F(ckjit_device_info, device);
  F(ckjit_device_info, arch); F(ckjit_device_info, device_arch); F(ckjit_device_info, name);
  F(ckjit_device_info, multiprocessors); F(ckjit_device_info, compiler);
  F(ckjit_device_info, cache_dir);
  end();

  BEGIN(ckjit_stats);
  F(ckjit_stats, memory_hits); F(ckjit_stats, disk_hits); F(ckjit_stats, disk_misses);
  F(ckjit_stats, disk_rejects); F(ckjit_stats, disk_writes); F(ckjit_stats, disk_write_errors);
  F(ckjit_stats, compiles); F(ckjit_stats, compile_failures); F(ckjit_stats, loads);
  F(ckjit_stats, load_failures); F(ckjit_stats, compile_ms); F(ckjit_stats, load_ms);
  F(ckjit_stats, remote_hits); F(ckjit_stats, remote_misses); F(ckjit_stats, remote_rejects);
  F(ckjit_stats, remote_writes); F(ckjit_stats, remote_errors); F(ckjit_stats, remote_lease_waits);
  F(ckjit_stats, remote_ms);
  end();

  BEGIN(ckjit_compile_result);
  F(ckjit_compile_result, cached); F(ckjit_compile_result, ms); F(ckjit_compile_result, code_size);
  F(ckjit_compile_result, key); F(ckjit_compile_result, kernel); F(ckjit_compile_result, stored);
  end();

  BEGIN(ckjit_epilogue);
  F(ckjit_epilogue, scale); F(ckjit_epilogue, bias);
  end();

  BEGIN(ckjit_tensor_layout);
  F(ckjit_tensor_layout, rank); F(ckjit_tensor_layout, shape); F(ckjit_tensor_layout, strides);
  end();

  BEGIN(ckjit_softmax_params);
  F(ckjit_softmax_params, scale); F(ckjit_softmax_params, log); F(ckjit_softmax_params, valid_cols);
  end();

  BEGIN(ckjit_norm_params);
  F(ckjit_norm_params, eps); F(ckjit_norm_params, weight); F(ckjit_norm_params, bias);
  F(ckjit_norm_params, residual); F(ckjit_norm_params, ld_residual); F(ckjit_norm_params, sum_out);
  F(ckjit_norm_params, ld_sum_out); F(ckjit_norm_params, mean_out); F(ckjit_norm_params, rstd_out);
  end();

  BEGIN(ckjit_gemm_desc);
  F(ckjit_gemm_desc, m); F(ckjit_gemm_desc, n); F(ckjit_gemm_desc, k);
  F(ckjit_gemm_desc, ab_dtype); F(ckjit_gemm_desc, out_dtype);
  F(ckjit_gemm_desc, a); F(ckjit_gemm_desc, lda); F(ckjit_gemm_desc, a_order);
  F(ckjit_gemm_desc, b); F(ckjit_gemm_desc, ldb); F(ckjit_gemm_desc, b_order);
  F(ckjit_gemm_desc, d); F(ckjit_gemm_desc, ldd); F(ckjit_gemm_desc, c); F(ckjit_gemm_desc, ldc);
  F(ckjit_gemm_desc, alpha); F(ckjit_gemm_desc, beta); F(ckjit_gemm_desc, bias);
  F(ckjit_gemm_desc, bias_mode); F(ckjit_gemm_desc, activation);
  F(ckjit_gemm_desc, d0); F(ckjit_gemm_desc, ldd0);
  F(ckjit_gemm_desc, d1); F(ckjit_gemm_desc, ldd1);
  F(ckjit_gemm_desc, batch); F(ckjit_gemm_desc, stride_a); F(ckjit_gemm_desc, stride_b);
  F(ckjit_gemm_desc, stride_c); F(ckjit_gemm_desc, stride_d); F(ckjit_gemm_desc, stride_d0);
  F(ckjit_gemm_desc, stride_d1); F(ckjit_gemm_desc, split_k); F(ckjit_gemm_desc, allow_tf32);
  end();

  BEGIN(ckjit_gemm_fp8_desc);
  F(ckjit_gemm_fp8_desc, m); F(ckjit_gemm_fp8_desc, n); F(ckjit_gemm_fp8_desc, k);
  F(ckjit_gemm_fp8_desc, a_dtype); F(ckjit_gemm_fp8_desc, b_dtype);
  F(ckjit_gemm_fp8_desc, out_dtype); F(ckjit_gemm_fp8_desc, a); F(ckjit_gemm_fp8_desc, lda);
  F(ckjit_gemm_fp8_desc, b); F(ckjit_gemm_fp8_desc, ldb); F(ckjit_gemm_fp8_desc, d);
  F(ckjit_gemm_fp8_desc, ldd); F(ckjit_gemm_fp8_desc, scaling);
  F(ckjit_gemm_fp8_desc, scale_a); F(ckjit_gemm_fp8_desc, scale_b);
  F(ckjit_gemm_fp8_desc, ld_scale_a); F(ckjit_gemm_fp8_desc, ld_scale_b);
  F(ckjit_gemm_fp8_desc, alpha); F(ckjit_gemm_fp8_desc, bias); F(ckjit_gemm_fp8_desc, bias_mode);
  F(ckjit_gemm_fp8_desc, activation); F(ckjit_gemm_fp8_desc, c); F(ckjit_gemm_fp8_desc, ldc);
  F(ckjit_gemm_fp8_desc, beta); F(ckjit_gemm_fp8_desc, d0); F(ckjit_gemm_fp8_desc, ldd0);
  F(ckjit_gemm_fp8_desc, d1); F(ckjit_gemm_fp8_desc, ldd1);
  end();

  BEGIN(ckjit_gemm_fp8_moe_desc);
  F(ckjit_gemm_fp8_moe_desc, gemm); F(ckjit_gemm_fp8_moe_desc, layout);
  F(ckjit_gemm_fp8_moe_desc, experts); F(ckjit_gemm_fp8_moe_desc, tile_experts);
  F(ckjit_gemm_fp8_moe_desc, counts); F(ckjit_gemm_fp8_moe_desc, stride_a);
  F(ckjit_gemm_fp8_moe_desc, stride_d); F(ckjit_gemm_fp8_moe_desc, stride_b);
  F(ckjit_gemm_fp8_moe_desc, stride_scale_a); F(ckjit_gemm_fp8_moe_desc, stride_scale_b);
  F(ckjit_gemm_fp8_moe_desc, stride_bias);
  end();

  BEGIN(ckjit_moe_sort_desc);
  F(ckjit_moe_sort_desc, tokens); F(ckjit_moe_sort_desc, k); F(ckjit_moe_sort_desc, experts);
  F(ckjit_moe_sort_desc, tile_m); F(ckjit_moe_sort_desc, ids_dtype);
  F(ckjit_moe_sort_desc, topk_ids); F(ckjit_moe_sort_desc, sorted_ids);
  F(ckjit_moe_sort_desc, expert_offsets); F(ckjit_moe_sort_desc, expert_counts);
  F(ckjit_moe_sort_desc, tile_experts); F(ckjit_moe_sort_desc, total_rows);
  F(ckjit_moe_sort_desc, invalid); F(ckjit_moe_sort_desc, expert_map);
  F(ckjit_moe_sort_desc, global_experts);
  end();
  BEGIN(ckjit_fused_moe_desc);
  F(ckjit_fused_moe_desc, tokens); F(ckjit_fused_moe_desc, hidden); F(ckjit_fused_moe_desc, inter);
  F(ckjit_fused_moe_desc, experts); F(ckjit_fused_moe_desc, k); F(ckjit_fused_moe_desc, dtype);
  F(ckjit_fused_moe_desc, x); F(ckjit_fused_moe_desc, ldx); F(ckjit_fused_moe_desc, y);
  F(ckjit_fused_moe_desc, ldy); F(ckjit_fused_moe_desc, ids_dtype);
  F(ckjit_fused_moe_desc, topk_ids); F(ckjit_fused_moe_desc, topk_weights);
  F(ckjit_fused_moe_desc, weight_dtype); F(ckjit_fused_moe_desc, w_gate_up);
  F(ckjit_fused_moe_desc, w_down); F(ckjit_fused_moe_desc, weight_scaling);
  F(ckjit_fused_moe_desc, scale_gate_up); F(ckjit_fused_moe_desc, scale_down);
  F(ckjit_fused_moe_desc, activation); F(ckjit_fused_moe_desc, workspace);
  F(ckjit_fused_moe_desc, workspace_bytes); F(ckjit_fused_moe_desc, invalid);
  F(ckjit_fused_moe_desc, expert_map); F(ckjit_fused_moe_desc, global_experts);
  F(ckjit_fused_moe_desc, shared_experts); F(ckjit_fused_moe_desc, shared_inter);
  F(ckjit_fused_moe_desc, w_shared_gate_up); F(ckjit_fused_moe_desc, w_shared_down);
  F(ckjit_fused_moe_desc, scale_shared_gate_up); F(ckjit_fused_moe_desc, scale_shared_down);
  F(ckjit_fused_moe_desc, shared_gate);
  end();

  BEGIN(ckjit_attention_strides);
  F(ckjit_attention_strides, batch); F(ckjit_attention_strides, head);
  F(ckjit_attention_strides, seq); F(ckjit_attention_strides, dim);
  end();

  BEGIN(ckjit_attention_desc);
  F(ckjit_attention_desc, dtype); F(ckjit_attention_desc, batch);
  F(ckjit_attention_desc, num_heads_q); F(ckjit_attention_desc, num_heads_kv);
  F(ckjit_attention_desc, seqlen_q); F(ckjit_attention_desc, seqlen_k);
  F(ckjit_attention_desc, head_dim_qk); F(ckjit_attention_desc, head_dim_v);
  F(ckjit_attention_desc, q); F(ckjit_attention_desc, q_strides);
  F(ckjit_attention_desc, k); F(ckjit_attention_desc, k_strides);
  F(ckjit_attention_desc, v); F(ckjit_attention_desc, v_strides);
  F(ckjit_attention_desc, o); F(ckjit_attention_desc, o_strides);
  F(ckjit_attention_desc, lse); F(ckjit_attention_desc, lse_strides);
  F(ckjit_attention_desc, cu_seqlens_q); F(ckjit_attention_desc, cu_seqlens_k);
  F(ckjit_attention_desc, softmax_scale); F(ckjit_attention_desc, mask);
  F(ckjit_attention_desc, window_left); F(ckjit_attention_desc, window_right);
  F(ckjit_attention_desc, bias); F(ckjit_attention_desc, bias_dtype);
  F(ckjit_attention_desc, bias_strides); F(ckjit_attention_desc, alibi_slopes);
  F(ckjit_attention_desc, alibi_stride_batch); F(ckjit_attention_desc, softcap);
  end();

  BEGIN(ckjit_paged_strides);
  F(ckjit_paged_strides, page); F(ckjit_paged_strides, slot);
  F(ckjit_paged_strides, head); F(ckjit_paged_strides, dim);
  end();

  BEGIN(ckjit_paged_kv);
  F(ckjit_paged_kv, num_pages); F(ckjit_paged_kv, page_size);
  F(ckjit_paged_kv, k_pages); F(ckjit_paged_kv, v_pages);
  F(ckjit_paged_kv, k_strides); F(ckjit_paged_kv, v_strides);
  F(ckjit_paged_kv, block_table); F(ckjit_paged_kv, max_pages_per_seq);
  F(ckjit_paged_kv, seqlens_k); F(ckjit_paged_kv, kv_indptr);
  F(ckjit_paged_kv, kv_page_indices); F(ckjit_paged_kv, kv_last_page_len);
  F(ckjit_paged_kv, error); F(ckjit_paged_kv, max_seqlen_k); F(ckjit_paged_kv, page_dtype);
  F(ckjit_paged_kv, k_scale); F(ckjit_paged_kv, v_scale); F(ckjit_paged_kv, scale_stride);
  end();

  BEGIN(ckjit_paged_attention_desc);
  F(ckjit_paged_attention_desc, dtype); F(ckjit_paged_attention_desc, batch);
  F(ckjit_paged_attention_desc, num_heads_q); F(ckjit_paged_attention_desc, num_heads_kv);
  F(ckjit_paged_attention_desc, head_dim_qk); F(ckjit_paged_attention_desc, head_dim_v);
  F(ckjit_paged_attention_desc, max_seqlen_q); F(ckjit_paged_attention_desc, cu_seqlens_q);
  F(ckjit_paged_attention_desc, q); F(ckjit_paged_attention_desc, q_strides);
  F(ckjit_paged_attention_desc, o); F(ckjit_paged_attention_desc, o_strides);
  F(ckjit_paged_attention_desc, lse); F(ckjit_paged_attention_desc, lse_strides);
  F(ckjit_paged_attention_desc, kv); F(ckjit_paged_attention_desc, softmax_scale);
  F(ckjit_paged_attention_desc, mask); F(ckjit_paged_attention_desc, window_left);
  F(ckjit_paged_attention_desc, window_right); F(ckjit_paged_attention_desc, softcap);
  end();

  BEGIN(ckjit_paged_kv_append_desc);
  F(ckjit_paged_kv_append_desc, dtype); F(ckjit_paged_kv_append_desc, batch);
  F(ckjit_paged_kv_append_desc, num_heads_kv); F(ckjit_paged_kv_append_desc, head_dim_qk);
  F(ckjit_paged_kv_append_desc, head_dim_v); F(ckjit_paged_kv_append_desc, max_seqlen_new);
  F(ckjit_paged_kv_append_desc, cu_seqlens_new); F(ckjit_paged_kv_append_desc, k_new);
  F(ckjit_paged_kv_append_desc, v_new); F(ckjit_paged_kv_append_desc, k_new_strides);
  F(ckjit_paged_kv_append_desc, v_new_strides); F(ckjit_paged_kv_append_desc, kv);
  end();

  printf("\n}\n");
  return 0;
}
