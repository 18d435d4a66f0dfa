"""torch: the tiny Llama, its KV caches (contiguous, paged, quantized), the prefill/decode loop, training, devices."""
