"""The benchmarks behind docs/benchmarks.md, one module per section (``mooncake-redis bench``
and ``bench-eviction`` in :mod:`..cli` run them): each asserts its calls succeed before it
reports a rate, and measures its baseline in the same run (the machine is shared and noisy).
"""
