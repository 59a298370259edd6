"""The admin's commands: the CLI (the only module that prints), the admin's view of the ledger,
and doctor.  See docs/wings.md."""
