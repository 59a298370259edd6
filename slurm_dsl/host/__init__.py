"""Running programs on this host: the subprocess edge (the only ``subprocess``) and which scontrol
and squeue run.  Below lookups and run, which both start processes.  See docs/wings.md."""
