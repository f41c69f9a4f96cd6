"""Try it: test inference on a served model, its form, saved examples, labels, rate limit."""
