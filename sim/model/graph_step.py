"""A cached decode step with static shapes, run op by op or captured once in a CUDA graph and replayed.

The eager step (Llama.forward) launches a few hundred small operators per token; on a GPU each launch
costs microseconds of CPU time whatever the work, so a tiny model's step is bound by launches. A CUDA graph
records the step's kernels once and replays them with one launch. That needs every shape and address fixed
(the gpt-fast approach): the cache is the ContiguousKVCache's preallocated buffers, the new K/V row is
written at a position held in a tensor (index_copy_), and attention reads all S_max slots with the unwritten
ones masked. The token and position go into fixed input tensors before each replay.

Step kinds:
    eager   the model's ordinary forward: dynamic shapes, attends to exactly the filled positions
    static  the same forward through a StaticKVCache (below), the position in a tensor, the unwritten slots
            masked: the graph's step, run op by op on any device (tests run it on a CPU)
    graph   that static step captured in a CUDA graph on the first step and replayed on every later one
"""

from __future__ import annotations

import time

import torch

from sim.cost.opcount import FlopTally
from sim.model.kvcache import KVCache
from sim.model.transformer import Llama
from sim.msg import Msg
from sim.refusal import Misuse, Refusal

STEP_KINDS = ("eager", "static", "graph")
WARMUP_RUNS = 2  # eager runs on a side stream before capture (cuBLAS and the allocator set up lazily)


def graph_unavailable(device: torch.device) -> Msg | None:
    """Why a CUDA graph cannot run on `device` (None when it can), a message value sim/words words."""
    if not torch.cuda.is_available():
        return Msg("decode.graph.no_cuda")
    if device.type != "cuda":
        return Msg("decode.graph.not_cuda", device=str(device))
    return None


def check_step_kind(step: str, device: torch.device) -> None:
    if step not in STEP_KINDS:
        raise Misuse(f"step must be one of {STEP_KINDS}, got {step!r}")
    if step == "graph" and (reason := graph_unavailable(device)):
        raise Refusal("decode.graph.needs_cuda", reason=reason)


class StaticKVCache(KVCache):
    """A step's view of a ContiguousKVCache (`base`) with every shape fixed: the new K/V row goes to the position
    held in the tensor `pos` (index_copy_, no host sync) and attention gets each layer's whole buffer, S_max slots,
    the caller masking those after `pos`. The base's length advances as its own steps' do."""

    def __init__(self, base: KVCache, *, pos: torch.Tensor) -> None:
        self.k, self.v = base.static_buffers()  # refuses a cache without preallocated buffers
        self.base, self.pos = base, pos  # pos (1,) long

    def begin_step(self, start_pos: int, num_new_tokens: int, *, batch_size: int) -> None:
        self.base.begin_step(start_pos, num_new_tokens, batch_size=batch_size)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        self.k[layer].index_copy_(2, self.pos, k)
        self.v[layer].index_copy_(2, self.pos, v)
        return self.k[layer], self.v[layer]  # (B, Hkv, S_max, D)

    def end_step(self) -> None:
        self.base.end_step()

    @property
    def num_tokens(self) -> int:
        return self.base.num_tokens

    def used_bytes(self) -> int:
        return self.base.used_bytes()


class StaticDecodeStep:
    """Decode one token per call at a given position into a ContiguousKVCache with fixed shapes; with
    graph=True the first call captures the step in a CUDA graph and every call replays it.

    `part_to_flops` is the step's matmul FLOPs counted on its first run (the shapes never change, so
    every later run executes the same): attention over all S_max slots, the masked ones included."""

    def __init__(self, model: Llama, cache: KVCache, *, attn_impl: str = "sdpa", graph: bool = False) -> None:
        dev = model.device
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)  # (1,) fixed input
        self.static_cache = StaticKVCache(cache, pos=self.pos)
        check_step_kind("graph" if graph else "static", dev)
        self.model, self.cache, self.attn_impl, self.use_graph = model, cache, attn_impl, graph
        batch, self.max_seq_len = self.static_cache.k[0].shape[0], self.static_cache.k[0].shape[2]
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=dev)  # (B, 1) fixed input
        self.slots = torch.arange(self.max_seq_len, device=dev)[None]  # (1, S_max)
        self.no_mask = torch.zeros(1, self.max_seq_len, device=dev, dtype=model.dtype)  # (1, S_max)
        self.logits: torch.Tensor | None = None  # (B, V) fixed output, overwritten by every call
        self.graph = None
        self.part_to_flops: dict[str, int] | None = None
        self.prepare_s = 0.0  # the one-off run (and capture) before the first step
        self._pos = 0  # the position on the host, for the cache's own checks

    @property
    def num_slots(self) -> int:
        return self.max_seq_len

    def _run(self, tally: FlopTally | None = None) -> torch.Tensor:
        mask = self.no_mask.masked_fill(self.slots > self.pos, float("-inf"))  # (1, S_max): the unwritten slots
        return self.model(self.token, start_pos=self._pos, cache=self.static_cache, positions=self.pos,
                          attn_mask=mask, attn_impl=self.attn_impl, tally=tally)[:, 0]  # (B, V)

    def _capture(self, tally: FlopTally) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up writes the same K/V row the real step will
            for i in range(WARMUP_RUNS):
                self._run(tally if i == 0 else None)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self._run()
        self.graph = graph

    def _set_inputs(self, token: torch.Tensor, pos: int) -> None:
        if not 0 <= pos < self.max_seq_len:
            raise Misuse(f"cache holds {self.max_seq_len} positions; asked to write position {pos}")
        if pos > self.cache.num_tokens:
            raise Misuse(f"write at position {pos} leaves a gap: only {self.cache.num_tokens} positions are "
                         "filled")
        self.token.copy_(token)
        self.pos.fill_(pos)
        self._pos = pos

    @torch.inference_mode()
    def prepare(self, token: torch.Tensor, pos: int) -> None:
        """Run the step once at `pos` with a FLOP tally and, for a graph, warm up and capture it. Running the
        step again at the same position writes the same K/V row, so the real step may follow. Its wall time
        (one-off, not a decode step's) is `prepare_s`."""
        t0 = time.perf_counter()
        self._set_inputs(token, pos)
        tally = FlopTally()
        if self.use_graph:
            self._capture(tally)
            torch.cuda.synchronize(self.model.device)
        else:
            self._run(tally)
        self.part_to_flops = dict(tally.part_to_flops)
        self.prepare_s = time.perf_counter() - t0

    @torch.inference_mode()
    def __call__(self, token: torch.Tensor, pos: int) -> torch.Tensor:
        """token (B, 1) at position `pos` -> logits (B, V), a view of the fixed output (copy it to keep it)."""
        if self.part_to_flops is None:
            self.prepare(token, pos)
        self._set_inputs(token, pos)
        if self.use_graph:
            self.static_cache.begin_step(pos, 1, batch_size=self.token.shape[0])  # the replay runs no Python: the cache's length is kept here
            self.graph.replay()
            self.static_cache.end_step()
        else:
            self.logits = self._run()
        return self.logits

