"""numpy only: op counts, KV memory by architecture, model and GPU presets, the roofline."""
