"""Running operations: one op's script, the ledger-tracked op, the bulk path over many jobs,
the sweep and settling (the processes they start are ``host``'s).  See docs/wings.md."""
