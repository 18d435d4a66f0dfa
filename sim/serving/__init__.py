"""numpy only. config: the engine's one config under vLLM's names (EngineConfig); scheduler: the one Scheduler in
vLLM v1's shape (Request, schedule() -> SchedulerOutput, update_from_output()); engine: it, timed pass by pass;
step_cost: what one forward pass costs (roofline); schedulers: static batching and the fast counting loop of
continuous batching; result: what a run produced; comparison: a deployment, both schedulers on one workload, the
max-batch sweep; speculative: speculative decoding's closed form, Monte Carlo, roofline timing and batch sweep
(seed 002's claims are worded in sim/words/serving_claims.py)."""
