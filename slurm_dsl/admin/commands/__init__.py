"""The ``slurm-dsl`` commands, one module each (the operations share ``ops``): its options,
its handler and what it prints.  ``admin/parser.py``'s ``REGISTRY`` lists them, and
imports each only when its grammar is built.  Importing one
module of the package runs only this file, which imports nothing."""
