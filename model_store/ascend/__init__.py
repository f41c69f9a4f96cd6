"""Running compiled Ascend artefacts (OM files) on an NPU through pyACL, outside Triton."""
