"""Management commands of the ops app."""
