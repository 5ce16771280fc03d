"""Statistics, tables and plots built from stored run results."""
