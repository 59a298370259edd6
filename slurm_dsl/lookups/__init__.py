"""Looking jobs up: squeue's strict parser and pyslurm's adapter (the only ``pyslurm``), and the
choice between them.  See docs/wings.md."""
