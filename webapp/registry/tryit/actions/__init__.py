"""Try it's actions: save and delete examples; set a model's labels and preprocessing."""
