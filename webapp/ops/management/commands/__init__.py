"""Management commands of the ops app (``python manage.py <name>``)."""
