"""The vLLM rules this lab follows, in one place, with the one vLLM version they are stated for.

Every figure the lab attributes to vLLM follows a rule below and names VLLM_VERSION (pages and the CLI word it
with `version_label()`). Each rule says, in a comment, the vLLM source file and function it comes from, so that a
reader can check it against that release. Defaults that changed between releases are kept as (version, value)
history and shown as version-dependent.

The rules were read in vLLM's own source (facts only; no code is taken from it). Where a default changed
recently, the change is named by its pull request.
"""

from __future__ import annotations

VLLM_VERSION = "0.24.0"


def version_label() -> str:
    """'vLLM v0.24.0': the words every figure attributed to vLLM carries."""
    return f"vLLM v{VLLM_VERSION}"


# --- the paged KV cache --------------------------------------------------------------------------

# vllm/config/cache.py, CacheConfig.block_size: the CUDA platform picks 16 when --block-size is not given
# (vllm/platforms/cuda.py, CudaPlatformBase.check_and_update_config); MLA backends raise it (FlashMLA: 64).
DEFAULT_BLOCK_SIZE = 16
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)  # vllm/config/cache.py, the BlockSize literal (--block-size choices)
FLASHMLA_BLOCK = 64  # vllm/v1/attention/backends/mla/flashmla.py: its kernel takes blocks of 64 tokens

# vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: max_num_batched_tokens and max_num_seqs depend on the
# usage context and the GPU: for the OpenAI server, 8,192 and 1,024 on a GPU of 70 GiB or more that is not an A100,
# else 2,048 and 256 (older releases: 2,048 or max_model_len, and 256 everywhere): version- and GPU-dependent
# defaults, so the command the lab writes states both.
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
MAX_NUM_BATCHED_TOKENS_HISTORY = (("the v0 engine", "max(max_model_len, 2048) without chunked prefill"),
                                  ("early v1 releases", "2048 with chunked prefill"),
                                  (VLLM_VERSION, "8192 for the OpenAI server on a large GPU"))
LARGE_GPU_BYTES = 70 << 30


def default_batch_limits(gpu_memory_bytes: int, gpu_name: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` picks on this GPU when neither is given."""
    if gpu_memory_bytes >= LARGE_GPU_BYTES and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256

# vllm/v1/core/kv_cache_manager.py, KVCacheManager.get_computed_blocks: max_cache_hit_length =
# request.num_tokens - 1, so the last prompt token is always computed (its logits give the first output token);
# hits come in whole blocks (only full blocks are hashed: vllm/v1/core/kv_cache_utils.py, hash_request_tokens).
LAST_TOKEN_RECOMPUTED = True

# vllm/v1/core/block_pool.py, BlockPool.cache_full_blocks: a block that fills is cached even when another block
# holds the same hash ("we currently don't de-duplicate the blocks in the cache"), so block tables stay
# append-only; BlockPool.get_cached_block returns the first of the copies.
DEDUPLICATES_CACHED_BLOCKS = False

# vllm/v1/core/kv_cache_manager.py, KVCacheManager.allocate_slots: a request is admitted when the free queue has
# the blocks it needs (BlockPool.get_num_free_blocks); v1 keeps no free-block watermark. (v0's
# vllm/core/block_manager.py, SelfAttnBlockSpaceManager, kept watermark = 0.01 of the blocks free.)
ADMISSION_WATERMARK = 0.0
V0_ADMISSION_WATERMARK = 0.01

# vllm/v1/core/sched/scheduler.py, Scheduler.schedule: running requests are scheduled first (a decode takes one
# token of max_num_batched_tokens, plus its draft tokens), then waiting ones; without chunked prefill a prompt
# that does not fit in what the budget has left stops admission for this step (first come, first served).
RUNNING_FIRST = True


# --- page sizes ----------------------------------------------------------------------------------

# vllm/v1/kv_cache_interface.py, MLAAttentionSpec.real_page_size_bytes: DeepSeek-V3.2's fp8 cache is
# "fp8_ds_mla" (vllm/model_executor/models/config.py, DeepseekV32ForCausalLM.verify_and_update_config turns
# --kv-cache-dtype fp8 into it): 512 FP8 latent values, 4 FP32 scales (one per 128) and the 64-value RoPE key
# kept in BF16: 512 + 4 × 4 + 64 × 2 = 656 bytes a token and layer (not 576).
FP8_DS_MLA_TOKEN_BYTES = 512 + 4 * 4 + 64 * 2
FP8_DS_MLA_SHAPE = (512, 64)  # (kv_lora_rank, qk_rope_head_dim) the format is laid out for

# vllm/config/cache.py, CacheDType "int8_per_token_head", and vllm/v1/kv_cache_interface.py,
# AttentionSpec.real_page_size_bytes (KVQuantMode.INT8_PER_TOKEN_HEAD): an INT8 cache keeps one FP32 scale per
# token and K/V head, for K and for V, beside the INT8 values (no zero point, no groups). Accepted by v0.24.0.
INT8_KV_CACHE_DTYPE = "int8_per_token_head"
INT8_SCALE_BYTES = 4


def int8_token_layer_bytes(n_kv_heads: int, head_dim: int, v_head_dim: int) -> int:
    """Bytes one token takes in one attention layer of vLLM's INT8 cache."""
    return n_kv_heads * ((head_dim + INT8_SCALE_BYTES) + (v_head_dim + INT8_SCALE_BYTES))


# vllm/model_executor/models/config.py, HybridAttentionMambaModelConfig.verify_and_update_config: the attention
# block size of a hybrid model is raised to the smallest multiple of the kernel alignment (16) whose page holds
# one Mamba / linear-attention state, and the state page is padded up to the attention page.
KERNEL_ALIGN = 16

# vllm/model_executor/layers/mamba/mamba_utils.py, MambaStateDtypeCalculator: --mamba-ssm-cache-dtype sets the
# recurrent (temporal / SSM) state only; the convolution state follows --mamba-cache-dtype ("auto": the model's
# dtype).
SSM_FLAG_SETS_CONV = False

# vllm/model_executor/models/config.py, NemotronHForCausalLMConfig: with --mamba-ssm-cache-dtype auto, Nemotron-H
# keeps its recurrent state in the config's mamba_ssm_cache_dtype, else in float32 (vLLM pull request #39032,
# April 2026; before it the same hook fell back to float16, and before the hook existed "auto" meant the model's
# dtype). A version-dependent default: (which releases, dtype).
NEMOTRON_H_SSM_DEFAULT = "fp32"
NEMOTRON_H_SSM_HISTORY = (("before pull request #39032", "fp16"), (VLLM_VERSION, NEMOTRON_H_SSM_DEFAULT))
NEMOTRON_H_MODEL_TYPES = ("nemotron_h",)

# vllm/v1/core/single_type_kv_cache_manager.py, ChunkedLocalAttentionManager.remove_skipped_blocks: a chunked
# local-attention layer (Llama 4) frees every block before the current chunk's start, so after S tokens it holds
# (S − 1) mod C + 1 of them; vllm/v1/kv_cache_interface.py, ChunkedLocalAttentionSpec.max_memory_usage_bytes
# reserves min(C + max_num_batched_tokens, max_model_len) tokens for it.
def chunked_tokens_held(context: int, chunk: int) -> int:
    """Tokens a chunked-attention layer holds once a request has `context` tokens: the current chunk so far."""
    return (context - 1) % chunk + 1 if context > 0 else 0


# vllm/v1/kv_cache_interface.py, SlidingWindowSpec.max_memory_usage_bytes: the last W − 1 tokens plus the step's
# new ones, plus one block because the window need not start at a block boundary.
SLIDING_EXTRA_BLOCKS = 1


# --- tensor parallelism --------------------------------------------------------------------------

# vllm/config/model.py, ModelConfig.get_num_kv_heads: K/V heads are split across tensor-parallel ranks; with more
# ranks than K/V heads each rank holds one (heads are replicated); MLA caches one latent per token that every
# rank keeps whole (ModelConfig.get_num_kv_heads returns 1 for MLA).
def kv_heads_per_rank(n_kv_heads: int, tp: int, mla: bool = False) -> int:
    if mla:
        return 1
    return max(1, n_kv_heads // tp)


# --- the startup log -----------------------------------------------------------------------------

# vllm/v1/core/kv_cache_utils.py, _report_kv_cache_config: "GPU KV cache size: N tokens" is num_blocks ×
# block_size (÷ layers per group for hybrid models), and "Maximum concurrency for L tokens per request: X" is
# that over the blocks one request of max_model_len needs; vllm/v1/worker/gpu_worker.py,
# Worker.determine_available_memory logs "Available KV cache memory: G GiB". vLLM issue #51041 reports the
# token figure read as a capacity for every request at once: it is a count of token slots, and
# slots = concurrency × max_model_len only for full attention.
LOG_AVAILABLE = "Available KV cache memory"
LOG_TOKENS = "GPU KV cache size"
LOG_CONCURRENCY = "Maximum concurrency"
