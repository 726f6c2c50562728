"""The Chronica benchmark harness (not part of the test run): ``python -m benchmarks.run --store URL``.

See ``benchmarks/README.md`` for what is measured and the raw-baseline interface backends implement.
"""
