"""The ledger: what slurm-dsl may have left in each job's Requeue flag, stored in SQLite or
MariaDB (the only ``sqlite3`` and ``pymysql``).  See docs/wings.md."""
