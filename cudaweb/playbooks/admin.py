from django.contrib import admin

from cudaweb.playbooks.models import PlaybookVote


@admin.register(PlaybookVote)
class PlaybookVoteAdmin(admin.ModelAdmin):
    list_display = ("playbook_id", "run", "user", "helped", "updated")
    list_filter = ("playbook_id", "helped")
