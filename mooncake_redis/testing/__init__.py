"""What tests and the chaos run need and the product does not: state probes, the chaos harness,
throwaway redis-server processes and the reference model of the stateful tests.

Nothing outside this package (and the ``chaos`` command of the CLI) imports it.
"""
