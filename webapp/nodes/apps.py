from django.apps import AppConfig


class NodesConfig(AppConfig):
    name = "webapp.nodes"
    label = "nodes"
    verbose_name = "Nodes"
