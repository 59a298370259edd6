"""Looking jobs up: squeue, pyslurm (its only importer) and the choice between them (docs/wings.md)."""
