"""Running operations: one op's script, the tracked op, bulk, the sweep and settling (docs/wings.md)."""
