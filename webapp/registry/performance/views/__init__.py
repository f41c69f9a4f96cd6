"""The Performance tab, the tuning panel and the "Edit serving config" page."""
