"""numpy only: schedulers (static, continuous), step costs from the roofline, speculative decoding."""
