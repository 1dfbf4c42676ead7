"""The `jobqueue` command: the service's roles (`main.py`) and an operator's commands
against a running service (`operate.py`)."""
