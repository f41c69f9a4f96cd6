"""The Try it tab: the page, its partials (a run's result, the examples), its Labels."""
