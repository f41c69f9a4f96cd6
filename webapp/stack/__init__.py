"""The embedded stack behind ``make run``: every process the product needs, on one machine."""
