"""Benchmarks of the trainer client, kept out of the installed ``rollout_stream`` package.

They run as ``python -m rollout_stream bench ...`` from a checkout (the CLI
finds this folder next to ``python/src``), or with ``python/bench`` on
``PYTHONPATH``. Modules: ``bench`` (decode vs copy), ``bench_breakdown``
(``--breakdown``), ``device_bench`` (``--device``), ``bench_publish*``
(``bench publish``), ``bench_collect`` (``bench collect``), ``skip_stale`` (``--skip-stale``).
"""
