"""`jobqueue bench dashboard`: every dashboard page timed on a big jobs table."""
