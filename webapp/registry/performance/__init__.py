"""Performance: sweeps of a served version, the search for its best config (tuning), and
config revisions (a packaged version with other serving options becomes the next version).
"""
