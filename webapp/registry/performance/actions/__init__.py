"""Performance's actions: ask for a sweep, a tuning search, a config revision."""
