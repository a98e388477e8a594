"""The `recall` commands, one module per command (`main`: the entry point and `recall run`)."""
