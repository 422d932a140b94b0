"""Quality studies over ``bbwd eval`` report folders (no timing)."""
