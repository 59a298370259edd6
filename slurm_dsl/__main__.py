from .admin.cli import run

run()
