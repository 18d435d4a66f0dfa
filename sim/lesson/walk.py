"""One token's attention, step by step, on the bundled model: its query against each cached key (scores), the
softmax weights, and the output, the weights' mix of the value rows. Computed here from the query, keys and values
the model itself produced (sim/model/cache_filling.py), and checked against the weights the model computed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.i18n import text

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


def walk_sentence(w: AttentionWalk, stage: int, lang: str = "en") -> str:
    """What the stage shows, with its numbers."""
    T, D = w.keys.shape
    if stage == 0:
        return text(lang, "lesson.walk.s0", p=f"{w.position}", d=f"{D}", layer=f"{w.layer}", head=f"{w.head}")
    if stage == 1:
        hi, lo = int(np.argmax(w.scores)), int(np.argmin(w.scores))
        return text(lang, "lesson.walk.s1", t=f"{T}", d=f"{D}", hi=f"{hi}", s_hi=f"{w.scores[hi]:.2f}", lo=f"{lo}",
                    s_lo=f"{w.scores[lo]:.2f}")
    if stage == 2:
        order = np.argsort(w.weights)[::-1]
        top = int(order[0])
        return text(lang, "lesson.walk.s2", top=f"{top}", w=f"{w.weights[top]:.1%}",
                    three=f"{w.weights[order[:3]].sum():.1%}", gap=f"{w.max_weight_gap:.1e}")
    return text(lang, "lesson.walk.s3", t=f"{T}", d=f"{D}", norm=f"{np.linalg.norm(w.output):.2f}")


def walk_title(w: AttentionWalk, stage: int, lang: str = "en") -> str:
    return text(lang, f"lesson.walk.t{stage}", p=f"{w.position}", layer=f"{w.layer}", head=f"{w.head}")
