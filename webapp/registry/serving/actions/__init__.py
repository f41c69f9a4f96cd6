"""Serving's actions: switches (serve, roll back, load, unload, compare, place) and canaries."""
