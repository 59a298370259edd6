"""Running programs on this host: the subprocess edge and which scontrol and squeue run (docs/wings.md)."""
