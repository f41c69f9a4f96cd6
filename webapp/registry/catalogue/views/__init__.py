"""The catalogue's pages: the Models list, a model, a version, adopting, the demo."""
