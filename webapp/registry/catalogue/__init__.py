"""The catalogue: models, their versions, tags and owners; retiring; adopting a repository."""
