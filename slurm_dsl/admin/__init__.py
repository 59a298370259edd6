"""The admin's commands: the CLI, the admin's view of the ledger, and doctor (docs/wings.md)."""
