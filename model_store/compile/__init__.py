"""Compilers that turn an uploaded ONNX model into what a deployment target serves."""
