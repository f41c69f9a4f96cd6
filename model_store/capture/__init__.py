"""Capture: a sample of the real requests a model receives, kept for verification, tuning and
quantisation (docs/capture.md). No Django here: the hub's side is webapp/registry/capture/."""
