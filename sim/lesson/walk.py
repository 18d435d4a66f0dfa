"""One token's attention, step by step, on the bundled model: its query against each cached key (scores), the
softmax weights, and the output, the weights' mix of the value rows. Computed here from the query, keys and values
the model itself produced (sim/model/cache_filling.py), and checked against the weights the model computed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

STAGES = 4  # query, scores, weights, output


@dataclass(frozen=True)
class AttentionWalk:
    position: int  # the query's position (the newest token)
    layer: int
    head: int
    q: np.ndarray  # (D,)
    keys: np.ndarray  # (T, D) the cached keys it reads, itself included
    values: np.ndarray  # (T, D)
    scores: np.ndarray  # (T,) q · k / sqrt(D)
    weights: np.ndarray  # (T,) softmax of the scores
    model_weights: np.ndarray  # (T,) the weights the model computed in its own forward pass
    output: np.ndarray  # (D,) weights @ values

    @property
    def max_weight_gap(self) -> float:
        return float(np.max(np.abs(self.weights - self.model_weights)))


def attention_walk(run, frame: int, layer: int, head: int = 0) -> AttentionWalk:
    """The last fed token of `frame` in `run` (a FillingRun): its query in `layer` and `head` against the keys the
    cache holds after that frame."""
    f = run.frames[frame]
    kv_head = head * run.num_kv_heads // run.num_heads
    q = f.q[layer, head].double().numpy()  # (D,)
    keys = run.keys(frame, layer, kv_head).double().numpy()  # (T, D)
    values = run.values(frame, layer, kv_head).double().numpy()
    scores = keys @ q / math.sqrt(q.shape[0])  # (T,)
    e = np.exp(scores - scores.max())
    weights = e / e.sum()
    return AttentionWalk(f.end - 1, layer, head, q, keys, values, scores, weights,
                         f.weights[layer, head].double().numpy(), weights @ values)
