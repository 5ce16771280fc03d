"""The engine: the optimizer loop (ask/tell), the external peers, the trace and one run as a task.
Imports the core, the store, the components and the design space."""
