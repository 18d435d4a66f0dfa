from app.placeholder import render_coming

render_coming(
    'kv_quantization',
    [
        ('KIVI: K per channel, V per token, residual window', 'issue 10; seed 001'),
        ('Error by token position, perplexity and agreement vs full precision', 'the tiny model'),
        ('Bytes saved including scales and zero points', 'sim/quant.py'),
    ],
)
