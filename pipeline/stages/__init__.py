"""Pipeline stages: each module has a pure array core and a thin wrapper the runner calls."""
