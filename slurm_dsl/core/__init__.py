"""The pure core: job ids, statuses, the scripts rendered, the readers, refusal rules, the
requeue combination and the ledger's rules.  Values in, values out: no process, file, clock,
database or network (tests/test_layers.py).  See docs/wings.md."""
