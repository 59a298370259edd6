"""The ``slurm-dsl`` commands, one module each (the operations share ``ops``), listed in ``admin/parser.py``'s
``REGISTRY``.  This file imports nothing, and each handler imports what it runs only when called
(docs/benchmarks.md §7)."""
