"""Tools for the people who work on the hub (linters and checks); not part of the product."""
