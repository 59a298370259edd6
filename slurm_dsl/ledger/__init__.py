"""The ledger: what slurm-dsl may have left in each job's Requeue flag, in SQLite or MariaDB (docs/wings.md §3)."""
