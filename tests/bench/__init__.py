"""`python -m bench [--quick]` (PYTHONPATH=tests): the project's benchmark against the testbed.

Every comparison runs side by side in one process, interleaved (A, B, A, B, ...), and is reported
as median with p10-p90 spread and as a ratio. Results go to `bench-results/latest.{md,json}`; the
table is copied by hand into `docs/performance.md`. See that page for what each row means.
"""
