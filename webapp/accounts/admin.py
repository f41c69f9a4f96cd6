from django.contrib import admin

from webapp.accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("key_prefix", "user", "name", "rate_per_minute", "created", "last_used")
    readonly_fields = ("key_hash", "key_prefix", "created", "last_used")
    search_fields = ("user__username", "name", "key_prefix")
