"""The configuration, in one place: every setting declared once (`settings.py`), how each
is read (`variables.py`), and the rules between them (`rules.py`)."""
