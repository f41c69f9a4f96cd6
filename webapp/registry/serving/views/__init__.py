"""Serving's pages: the switch buttons' endpoints and the model page's Nodes card."""
