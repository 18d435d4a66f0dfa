"""numpy only. step_cost: what one forward pass costs (roofline); schedulers: static and continuous batching;
result: what a run produced; comparison: a deployment, both schedulers on one workload, the max-batch sweep;
speculative: speculative decoding's closed form, Monte Carlo, roofline timing and batch sweep; serving_claims: seed 002's."""
