"""torch: the Llama (the bundled tiny models and the real SmolLM2 read from its GGUF), its KV caches (contiguous,
paged, quantized, evicting), the prefill/decode loop, training, devices."""
