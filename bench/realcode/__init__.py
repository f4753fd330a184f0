"""Real-code corpus of pinned public releases (issue 16): fetch, lint, report. See README.md here."""
