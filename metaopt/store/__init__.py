"""The study store: the study schema, one run's files, the layout of a study's output folder and the
meta-archive. Imports only the core."""
