"""The fault-injection checker (issue 33): random workloads and faults on the real lab, each
history checked against the contract's invariants by a checker written apart from the product.

- ``schedule``: a seed and a length in, a schedule of operations and faults out (pure).
- ``runner``: plays a schedule on the lab and writes its history (JSON lines).
- ``history``: the history's lines, written and read.
- ``checker``: a history in, the violations out, each with the lines that prove it (pure; it
  imports nothing of ``slurm_dsl``).
- ``caller``: a library caller, one process, for the schedule's API operations.
- ``__main__``: ``python -m tests.chaos``, the command (docs/testing.md §6).
"""
