"""Running operations: processes (the only ``subprocess``), one op's script, the ledger-tracked
op, the bulk path over many jobs, and the sweep.  See docs/wings.md."""
