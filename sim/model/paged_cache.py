"""A paged KV cache for the real model: K/V live in a pool of physical blocks, found through block tables.

Per layer, K and V are one tensor each of shape (num_blocks, Hkv, block_size, D). Which blocks a
request owns, in which order, is kept by a `sim.alloc.block_pool.BlockPool` (free queue, ref counts,
copy-on-write). It keeps the KVCache contract (sim.model.kvcache): `begin_step` takes the blocks the
step's tokens need (copying a shared last block first), `write` puts each layer's new tokens into their
slots and returns every key/value to attend to as (B, Hkv, S, D), gathered block by block through the
table. Row b of the model's batch is request
`batch[b]` (`set_batch`), so forked branches decode against shared prompt blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sim.alloc.block_pool import BlockPool, PoolSnapshot, cdiv
from sim.model.generate import SamplingConfig, check_lengths, decode_loop, generate, prefill
from sim.model.kvcache import KVCache
from sim.model.transformer import Llama
from sim.refusal import Misuse
from sim.work.run_cost import ModelRates, cached_work

# Measured here: a paged decode step (gathering K/V through the block table) costs about twice a
# contiguous one; a run decodes every branch paged, then each again alone with a contiguous cache.
PAGED_STEP_FACTOR = 2.0


class PagedKVCache(KVCache):
    def __init__(self, cfg, *, num_blocks: int, block_size: int = 16, device=None, dtype=torch.float32):
        self.cfg = cfg
        self.pool = BlockPool(num_blocks, block_size)
        shape = (num_blocks, cfg.n_kv_heads, block_size, cfg.head_dim)  # (NB, Hkv, bs, D)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layers)]
        self.batch: list[int] = [0]
        self._tables: list[torch.Tensor] = []  # this forward pass's block tables, one per batch row
        self._step = (0, 0)  # (start, end) of the step being written
        self.num_copied_blocks = 0

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    @property
    def bytes_per_block(self) -> int:
        """K and V of one block in every layer."""
        t = self.k[0]
        return 2 * len(self.k) * t[0].numel() * t.element_size()

    def set_batch(self, req_ids: list[int]) -> None:
        """The requests the next forward pass runs, one per batch row."""
        if not req_ids or len(set(req_ids)) != len(req_ids):
            raise Misuse(f"a batch needs distinct request ids, got {req_ids}")
        self.batch = list(req_ids)

    def fork(self, parent: int, child: int) -> None:
        self.pool.fork(parent, child)

    def free(self, req_id: int) -> None:
        self.pool.free(req_id)

    def block_table(self, req_id: int) -> list[int]:
        return self.pool.block_table(req_id)

    def _copy_block(self, src: int, dst: int) -> None:
        for k, v in zip(self.k, self.v, strict=True):
            k[dst].copy_(k[src])
            v[dst].copy_(v[src])
        self.num_copied_blocks += 1

    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        """Every request of the batch must hold exactly start_pos tokens; each gets the blocks for the new ones."""
        if batch_size != len(self.batch):
            raise Misuse(f"the batch has {batch_size} rows but set_batch named {len(self.batch)} requests")
        for req in self.batch:
            have = self.pool.req_to_num_tokens.get(req, 0)
            if have != start_pos:
                raise Misuse(f"request {req} holds {have} tokens, but the model writes at position {start_pos}: "
                             "a paged cache is written in order, without gaps or rewrites")
        for req in self.batch:
            if req in self.pool.req_to_block_table:
                for src, dst in self.pool.append(req, num_new_tokens):  # copy-on-write of a shared last block
                    self._copy_block(src, dst)
            else:
                self.pool.add_request(req, num_new_tokens)
        device = self.k[0].device
        self._tables = [torch.tensor(self.pool.req_to_block_table[r], device=device) for r in self.batch]
        self._step = (start_pos, start_pos + num_new_tokens)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        B, Hkv, T, D = k.shape  # (B, Hkv, T, D)
        start_pos, end = self._step
        bs = self.block_size
        pos = torch.arange(start_pos, end, device=k.device)
        keys, values = [], []
        for b, table in enumerate(self._tables):
            blocks, offsets = table[pos // bs], pos % bs  # (T,), (T,)
            self.k[layer][blocks, :, offsets] = k[b].transpose(0, 1)  # (T, Hkv, D)
            self.v[layer][blocks, :, offsets] = v[b].transpose(0, 1)
            nb = cdiv(end, bs)
            keys.append(self.k[layer][table[:nb]].transpose(0, 1).reshape(Hkv, nb * bs, D)[:, :end])  # (Hkv, S, D)
            values.append(self.v[layer][table[:nb]].transpose(0, 1).reshape(Hkv, nb * bs, D)[:, :end])
        return torch.stack(keys), torch.stack(values)  # (B, Hkv, S, D)

    def end_step(self) -> None:
        pass  # the pool counted the tokens when begin_step took their blocks

    @property
    def num_tokens(self) -> int:
        return self.pool.req_to_num_tokens.get(self.batch[0], 0)

    def used_bytes(self) -> int:
        """Bytes of the blocks in use (a block shared by several requests counts once)."""
        return self.pool.num_used_blocks * self.bytes_per_block

    def reserved_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v)


@dataclass(frozen=True, kw_only=True)
class PagedRun:
    """n branches decoded from one prompt through a paged cache, next to the contiguous-cache reference."""

    prompt_ids: list[int]
    branch_ids: list[list[int]]  # new tokens of each branch
    reference_ids: list[list[int]]  # the same branches decoded alone with a ContiguousKVCache
    max_abs_logit_diff: float
    block_size: int
    after_prefill: PoolSnapshot
    final: PoolSnapshot
    num_copied_blocks: int  # copy-on-write copies made
    bytes_per_block: int
    num_blocks_if_copied: int  # every branch with its own full-length table

    @property
    def tokens_identical(self) -> bool:
        return self.branch_ids == self.reference_ids

    @property
    def used_bytes(self) -> int:
        return self.final.num_used_blocks * self.bytes_per_block

    @property
    def bytes_if_copied(self) -> int:
        return self.num_blocks_if_copied * self.bytes_per_block

    @property
    def num_shared_blocks(self) -> int:
        return int((self.final.ref_cnt > 1).sum())


def paged_run_seconds(rates: ModelRates, *, prompt_len: int, max_new_tokens: int, num_branches: int) -> float:
    """What `paged_generate` will take: every branch decoded paged, then again alone with a contiguous cache."""
    return (PAGED_STEP_FACTOR + 1) * num_branches * rates.seconds(cached_work(prompt_len, max_new_tokens))


def paged_generate(
    model: Llama,
    prompt_ids: list[int],
    max_new_tokens: int,
    *,
    num_branches: int = 1,
    block_size: int = 16,
    sampling: SamplingConfig = SamplingConfig(),
    attn_impl: str = "eager",
) -> PagedRun:
    """Prefill once, fork into num_branches requests (parallel sampling: branch b samples with seed + b),
    decode them in turns through the paged cache, then decode each branch again alone with a
    ContiguousKVCache and compare tokens and logits."""
    check_lengths(model, len(prompt_ids), max_new_tokens)
    if not 1 <= num_branches <= 16:
        raise Misuse(f"num_branches must be 1..16, got {num_branches}")
    cfg = model.cfg
    per_branch = cdiv(len(prompt_ids) + max_new_tokens, block_size)
    cache = PagedKVCache(cfg, num_blocks=num_branches * per_branch + 1, block_size=block_size, device=model.device, dtype=model.dtype)
    configs = [SamplingConfig(sampling.temperature, sampling.top_k, sampling.seed + b) for b in range(num_branches)]
    picks = [c.sampler() for c in configs]
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=model.device)  # (1, T)
    cache.set_batch([0])
    first = prefill(model, ids, cache, attn_impl=attn_impl)[0].float().cpu()  # (V,)
    after_prefill = cache.pool.snapshot(0)
    for b in range(1, num_branches):
        cache.fork(0, b)
    branch_ids = [[picks[b](first)] for b in range(num_branches)]
    logits = [[first] for _ in range(num_branches)]
    # each branch is the one decode loop from its first token on; the branches take turns, a step each
    loops = [decode_loop(model, branch_ids[b][:1], max_new_tokens - 1, cache=cache, pick=picks[b], start_pos=len(prompt_ids),
                         attn_impl=attn_impl,
                         keep_logits=True) for b in range(num_branches)]
    for _ in range(1, max_new_tokens):
        for b in range(num_branches):
            cache.set_batch([b])
            rec = next(loops[b])
            logits[b].append(rec.logits)
            branch_ids[b].append(rec.token)
    cache.pool.check_invariants()
    reference_ids, diff = [], 0.0
    for b in range(num_branches):
        ref = generate(model, prompt_ids, max_new_tokens, mode="cached", sampling=configs[b], attn_impl=attn_impl,
                       keep_logits=True, count=False)
        reference_ids.append(ref.new_ids)
        for ours, theirs in zip(logits[b], ref.steps, strict=True):
            diff = max(diff, float((ours - theirs.logits).abs().max()))
    return PagedRun(
        prompt_ids=list(prompt_ids), branch_ids=branch_ids, reference_ids=reference_ids, max_abs_logit_diff=diff,
        block_size=block_size, after_prefill=after_prefill, final=cache.pool.snapshot(max_new_tokens),
        num_copied_blocks=cache.num_copied_blocks, bytes_per_block=cache.bytes_per_block,
        num_blocks_if_copied=num_branches * cdiv(len(prompt_ids) + max_new_tokens - 1, block_size),
    )
