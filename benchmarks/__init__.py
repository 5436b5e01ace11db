"""kudusql benchmarks: each module times kudusql against a rival on the same data.

Run them with ``python -m benchmarks [name ...] [--sf 1] [--rows N] [--profile]``.
"""
