"""The ``recall`` commands, one module per command: ``main`` holds the command table
(``main.COMMANDS``: name → module, entry point, help), the shared Hydra override checks and dispatch;
``hydra_guard`` the checked Hydra config loader every Hydra command composes with."""
